//! LOLWUT: computer art and the server version, as Redis 7.0 draws it.
//!
//! `LOLWUT [VERSION v] [args...]` picks the artwork by the version it is asked to impersonate:
//! 5 draws Georg Nees's "Schotter" (squares that rotate and drift more row after row) in Braille
//! characters, 6 a city skyline in terminal colours, and any other version (the default, since
//! this is 7.0) only the version line. The randomness is the point of the art, so only the
//! layout is fixed: the canvas sizes, the clamping of arguments, the characters and escape
//! codes used and the closing lines are Redis's; which pixels are set varies per call, as there.
//!
//! This module owns the drawing canvas too: nothing else draws.

use super::flags::*;
use super::{spec, Args, CmdResult, CommandSpec, Ctx, NO_KEYS};
use crate::resp::Reply;

pub static COMMANDS: &[CommandSpec] = &[spec("lolwut", -1, READONLY | FAST, NO_KEYS, 0, lolwut)];

/// LOLWUT [VERSION version] [art arguments ...]
///
/// Version 5: `[columns [squares-per-row [squares-per-col]]]` (66, 8, 12 by default). Version 6:
/// `[columns [rows]]` (80, 20). Others: just the version line. A verbatim `txt` string.
pub fn lolwut(_ctx: &mut Ctx, args: &Args) -> CmdResult {
    let mut art_args: Vec<i64> = Vec::new();
    let mut first_art_arg = 1;
    // Redis renders the requested version as "<v>.0.0" from an unsigned int, then matches the
    // string's prefix: 5.x (and 4.9) draw Schotter, 6.x (and 5.9) the skyline.
    let mut artwork = Artwork::VersionOnly;
    if args.len() >= 3 && args.is(1, "version") {
        let version = args.i64(2)? as u32;
        artwork = match version {
            5 => Artwork::Schotter,
            6 => Artwork::Skyline,
            _ => Artwork::VersionOnly,
        };
        first_art_arg = 3;
    }
    let wanted = match artwork {
        Artwork::Schotter => 3,
        Artwork::Skyline => 2,
        Artwork::VersionOnly => 0,
    };
    for i in first_art_arg..args.len().min(first_art_arg + wanted) {
        art_args.push(args.i64(i)?);
    }
    let text = match artwork {
        Artwork::Schotter => {
            let arg = |i: usize, default: i64, max: i64| art_args.get(i).copied().unwrap_or(default).clamp(1, max);
            let canvas = schotter(arg(0, 66, 1000), arg(1, 8, 200), arg(2, 12, 200));
            let mut text = canvas.render_braille();
            text.extend_from_slice(b"\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. ");
            text.extend_from_slice(crate::REDIS_VERSION.as_bytes());
            text.push(b'\n');
            text
        }
        Artwork::Skyline => {
            let arg = |i: usize, default: i64| art_args.get(i).copied().unwrap_or(default).clamp(1, 1000);
            let mut canvas = Canvas::new(arg(0, 80) as usize, arg(1, 20) as usize, WHITE);
            skyline(&mut canvas);
            let mut text = canvas.render_colors();
            text.extend_from_slice(
                b"\nDedicated to the 8 bit game developers of past and present.\n\
                  Original 8 bit image from Plaguemon by hikikomori. Redis ver. ",
            );
            text.extend_from_slice(crate::REDIS_VERSION.as_bytes());
            text.push(b'\n');
            text
        }
        Artwork::VersionOnly => format!("Redis ver. {}\n", crate::REDIS_VERSION).into_bytes(),
    };
    Ok(Reply::Verbatim("txt", text))
}

enum Artwork {
    Schotter,
    Skyline,
    VersionOnly,
}

/// A grid of pixels, each a small colour number; reads outside it are 0, writes are dropped.
struct Canvas {
    width: usize,
    height: usize,
    pixels: Vec<u8>,
}

/// The skyline's sky (its palette runs from 0, black, to 3; Schotter uses 0 and 1 only).
const WHITE: u8 = 3;

impl Canvas {
    fn new(width: usize, height: usize, background: u8) -> Canvas {
        Canvas { width, height, pixels: vec![background; width * height] }
    }

    fn set(&mut self, x: i64, y: i64, color: u8) {
        if x >= 0 && y >= 0 && (x as usize) < self.width && (y as usize) < self.height {
            self.pixels[y as usize * self.width + x as usize] = color;
        }
    }

    fn get(&self, x: i64, y: i64) -> u8 {
        if x >= 0 && y >= 0 && (x as usize) < self.width && (y as usize) < self.height {
            self.pixels[y as usize * self.width + x as usize]
        } else {
            0
        }
    }

    /// Bresenham's line, both ends included.
    fn line(&mut self, (mut x, mut y): (i64, i64), (x2, y2): (i64, i64), color: u8) {
        let (dx, dy) = ((x2 - x).abs(), (y2 - y).abs());
        let (sx, sy) = (if x < x2 { 1 } else { -1 }, if y < y2 { 1 } else { -1 });
        let mut err = dx - dy;
        loop {
            self.set(x, y, color);
            if x == x2 && y == y2 {
                break;
            }
            let e2 = err * 2;
            if e2 > -dy {
                err -= dy;
                x += sx;
            }
            if e2 < dx {
                err += dx;
                y += sy;
            }
        }
    }

    /// A square of side `size` centred on (x, y), turned by `angle` radians.
    fn square(&mut self, x: i64, y: i64, size: f32, angle: f32) {
        // The corners sit on a circle of radius side/√2; start at 45° so angle 0 is upright.
        let radius = (size / std::f32::consts::SQRT_2).round() as f64;
        let mut k = std::f32::consts::FRAC_PI_4 + angle;
        let mut corners = [(0i64, 0i64); 4];
        for corner in &mut corners {
            let k64 = k as f64;
            *corner = ((k64.sin() * radius + x as f64).round() as i64, (k64.cos() * radius + y as f64).round() as i64);
            k += std::f32::consts::FRAC_PI_2;
        }
        for j in 0..4 {
            self.line(corners[j], corners[(j + 1) % 4], 1);
        }
    }

    /// Two by four pixels per character, as the Unicode Braille patterns (U+2800 + dot bits)
    /// number their dots: the left column top-down is bits 0-2, the right column 3-5, and the
    /// bottom row bits 6 and 7. Rows are separated by newlines.
    fn render_braille(&self) -> Vec<u8> {
        let mut text = Vec::new();
        for y in (0..self.height as i64).step_by(4) {
            for x in (0..self.width as i64).step_by(2) {
                let dots = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (0, 3), (1, 3)];
                let mut bits = 0u32;
                for (bit, (dx, dy)) in dots.into_iter().enumerate() {
                    if self.get(x + dx, y + dy) != 0 {
                        bits |= 1 << bit;
                    }
                }
                let mut utf8 = [0u8; 4];
                let glyph = char::from_u32(0x2800 + bits).unwrap_or('\u{2800}');
                text.extend_from_slice(glyph.encode_utf8(&mut utf8).as_bytes());
            }
            // Redis compares the row start with the last pixel row, so a canvas whose height is
            // one more than a multiple of four ends without a newline.
            if y != self.height as i64 - 1 {
                text.push(b'\n');
            }
        }
        text
    }

    /// One space per pixel, its foreground and background set to the pixel's grey level.
    fn render_colors(&self) -> Vec<u8> {
        let mut text = Vec::with_capacity(self.width * self.height * 16);
        for y in 0..self.height {
            for x in 0..self.width {
                let escape: &[u8] = match self.pixels[y * self.width + x] {
                    1 => b"0;90;100m",
                    2 => b"0;37;47m",
                    3 => b"0;97;107m",
                    _ => b"0;30;40m",
                };
                text.extend_from_slice(b"\x1b[");
                text.extend_from_slice(escape);
                text.extend_from_slice(b" \x1b[0m");
            }
            if y != self.height - 1 {
                text.push(b'\n');
            }
        }
        text
    }
}

/// A random number in [0, 1], as C's `rand() / RAND_MAX`.
fn unit() -> f32 {
    fastrand::f32()
}

/// Schotter: `per_row` × `per_col` squares on a canvas `columns` characters wide; the first two
/// rows stand straight, and below them each square turns and drifts by up to row/`per_col`.
fn schotter(columns: i64, per_row: i64, per_col: i64) -> Canvas {
    let width = columns * 2;
    let padding = if width > 4 { 2 } else { 0 };
    let side = (width - padding * 2) as f32 / per_row as f32;
    let height = (side * per_col as f32) as i64 + padding * 2;
    let mut canvas = Canvas::new(width as usize, height.max(0) as usize, 0);
    for row in 0..per_col {
        for col in 0..per_row {
            let mut sx = (col as f32 * side + side / 2.0) as i64 + padding;
            let mut sy = (row as f32 * side + side / 2.0) as i64 + padding;
            let mut angle = 0.0;
            if row > 1 {
                let drift = || {
                    let r = unit() / per_col as f32 * row as f32;
                    if fastrand::bool() {
                        -r
                    } else {
                        r
                    }
                };
                angle = drift();
                sx = (sx as f32 + drift() * side / 3.0) as i64;
                sy = (sy as f32 + drift() * side / 3.0) as i64;
            }
            canvas.square(sx, sy, side, angle);
        }
    }
    canvas
}

/// The skyline: three rows of skyscrapers on a white sky, from the far light-grey ones (wide
/// overlap) to the near black ones, each with lit windows or none.
fn skyline(canvas: &mut Canvas) {
    let height = canvas.height as i64;
    for color in (0..=2u8).rev() {
        let mut x = -10;
        while x < canvas.width as i64 {
            let width = 10 + fastrand::i64(0..20);
            let spread = match color {
                2 => height / 2,
                1 => height / 3,
                _ => height / 4,
            };
            let tall = height / 2 + if spread > 0 { fastrand::i64(0..spread) } else { 0 };
            let building = Skyscraper { left: x, width, height: tall, windows: fastrand::bool(), color };
            building.draw(canvas);
            x += if color == 2 { width / 2 } else { width + 1 };
        }
    }
}

struct Skyscraper {
    left: i64,
    width: i64,
    height: i64,
    windows: bool,
    color: u8,
}

impl Skyscraper {
    fn draw(&self, canvas: &mut Canvas) {
        let bottom = canvas.height as i64 - 1;
        let top = bottom - self.height + 1;
        let right = self.left + self.width;
        for y in (top..=bottom).rev() {
            for x in self.left..right {
                // The roof is two pixels narrower on each side.
                if y == top && (x <= self.left + 1 || x >= right - 2) {
                    continue;
                }
                let mut color = self.color;
                let inner = x > self.left + 1 && x < right - 2 && y > top + 1 && y < bottom - 1;
                if self.windows && inner {
                    // Windows are two pixels wide and one tall (terminal cells are tall), on
                    // every other row and every other pair of columns.
                    let (rel_x, rel_y) = (x - (self.left + 1), y - (top + 1));
                    if (rel_x / 2) % 2 == 1 && rel_y % 2 == 1 {
                        color = if rel_x % 2 == 1 {
                            canvas.get(x - 1, y)
                        } else {
                            loop {
                                let lit = fastrand::u8(0..4);
                                if lit != self.color {
                                    break lit;
                                }
                            }
                        };
                    }
                }
                canvas.set(x, y, color);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_square_schotter_is_redis_glyph() {
        // 1 column, 1×1 squares: a 2×2 canvas whose square's visible corner sets three pixels;
        // Redis draws the same ⠋ (U+280B).
        let canvas = schotter(1, 1, 1);
        assert_eq!(canvas.render_braille(), "⠋\n".as_bytes());
    }

    #[test]
    fn schotter_rows_and_columns() {
        let text = String::from_utf8(schotter(66, 8, 12).render_braille()).unwrap();
        let rows: Vec<&str> = text.lines().collect();
        // 132 pixels wide, padding 2: side 16, height 16*12+4 = 196 pixels = 49 braille rows.
        assert_eq!(rows.len(), 49);
        assert!(rows.iter().all(|r| r.chars().count() == 66));
    }

    #[test]
    fn skyline_cells() {
        let mut canvas = Canvas::new(7, 3, WHITE);
        skyline(&mut canvas);
        let text = canvas.render_colors();
        assert_eq!(text.iter().filter(|&&b| b == b'\n').count(), 2);
        assert_eq!(text.windows(4).filter(|w| w == b"\x1b[0m").count(), 21);
    }
}
