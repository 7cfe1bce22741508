//! hashes commands. (Module created empty; its family is filled in here.)

use super::CommandSpec;

pub static COMMANDS: &[CommandSpec] = &[];
