//! Server commands (INFO, CONFIG, CLIENT, COMMAND, SLOWLOG, DEBUG, SHUTDOWN, ...). Bootstrap subset.

use super::CommandSpec;

pub static COMMANDS: &[CommandSpec] = &[];
