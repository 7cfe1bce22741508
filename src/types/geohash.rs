//! Geohash arithmetic for the GEO commands: 52-bit interleaved cell numbers, their areas and
//! neighbours, haversine distances, and the nine-cell cover of a search shape. Knows nothing of
//! commands, keys or replies; `commands::geo` drives it.
//!
//! A position is stored as a sorted-set score: the longitude range [-180, 180] and the latitude
//! range [-85.05112878, 85.05112878] (the Web Mercator limits) are each cut into 2^26 slices, and
//! the two 26-bit slice numbers are interleaved, longitude on the odd bits and latitude on the
//! even ones, so that a coarser cell (a prefix of `2 * step` bits) is a contiguous score range.
//!
//! Every computation here follows Redis 7.0's floating-point steps one for one (same operation
//! order, same libm functions, same C casts), because which member falls inside a radius at the
//! edge, and the digits printed for a coordinate, depend on the last bit. Do not "simplify" the
//! formulas: an algebraically equal rewrite rounds differently.

use std::f64::consts::PI;

/// Bits per coordinate of a stored position.
pub const STEP_MAX: u8 = 26;
pub const LON_MIN: f64 = -180.0;
pub const LON_MAX: f64 = 180.0;
pub const LAT_MIN: f64 = -85.05112878;
pub const LAT_MAX: f64 = 85.05112878;
/// The mean Earth radius Redis uses (metres).
pub const EARTH_RADIUS_M: f64 = 6372797.560856;
/// Half the Web Mercator world width (metres): the scale for estimating a search step.
const MERCATOR_MAX: f64 = 20037726.37;
const DEG_TO_RAD: f64 = PI / 180.0;

fn deg_rad(deg: f64) -> f64 {
    deg * DEG_TO_RAD
}

fn rad_deg(rad: f64) -> f64 {
    rad / DEG_TO_RAD
}

/// A cell: `2 * step` interleaved bits. `step == 0` marks an unused (excluded) neighbour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cell {
    pub bits: u64,
    pub step: u8,
}

impl Cell {
    /// An excluded neighbour (Redis's zeroed hash).
    pub const NONE: Cell = Cell { bits: 0, step: 0 };

    pub fn is_none(&self) -> bool {
        self.bits == 0 && self.step == 0
    }

    /// The scores `[min, max)` of every stored position inside this cell.
    pub fn score_range(&self) -> (u64, u64) {
        let shift = 52u32.saturating_sub(2 * self.step as u32);
        let min = self.bits.wrapping_shl(shift);
        let max = self.bits.wrapping_add(1).wrapping_shl(shift);
        (min, max)
    }
}

/// A closed interval of degrees.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Span {
    pub min: f64,
    pub max: f64,
}

/// The longitude and latitude extent of a cell.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Area {
    pub lon: Span,
    pub lat: Span,
}

const WGS84_LON: Span = Span { min: LON_MIN, max: LON_MAX };
const WGS84_LAT: Span = Span { min: LAT_MIN, max: LAT_MAX };
/// The conventional geohash ranges (GEOHASH's strings are computed over these).
const STANDARD_LAT: Span = Span { min: -90.0, max: 90.0 };

/// Spreads the 32 bits of `v` over the even bits of a u64.
fn spread(v: u32) -> u64 {
    let mut x = v as u64;
    x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x | (x << 1)) & 0x5555_5555_5555_5555
}

/// Gathers the even bits of `x` into a u32 (inverse of `spread`).
fn gather(x: u64) -> u32 {
    let mut x = x & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x >> 4)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x >> 8)) & 0x0000_FFFF_0000_FFFF;
    ((x | (x >> 16)) & 0x0000_0000_FFFF_FFFF) as u32
}

/// Latitude slice on the even bits, longitude slice on the odd bits.
pub fn interleave(lat: u32, lon: u32) -> u64 {
    spread(lat) | (spread(lon) << 1)
}

/// `(lat, lon)` slice numbers of interleaved bits.
pub fn deinterleave(bits: u64) -> (u32, u32) {
    (gather(bits), gather(bits >> 1))
}

/// C's `(uint32_t)` of a non-negative double below 2^32 (truncation); other values as x86-64
/// produces them through a 64-bit conversion.
fn to_u32(v: f64) -> u32 {
    c_double_to_u64(v) as u32
}

/// C's `(int64_t)` conversion as x86-64 performs it (cvttsd2si): truncation, and the
/// "integer indefinite" value i64::MIN for NaN and anything out of range.
pub fn c_double_to_i64(v: f64) -> i64 {
    const LIMIT: f64 = 9_223_372_036_854_775_808.0; // 2^63
    if v.is_nan() || !(-LIMIT..LIMIT).contains(&v) {
        i64::MIN
    } else {
        v as i64
    }
}

/// C's `(uint64_t)` conversion as gcc emits it on x86-64: values below 2^63 go through the
/// signed conversion (so -1.0 becomes all ones), larger ones are offset by 2^63 first.
pub fn c_double_to_u64(v: f64) -> u64 {
    const LIMIT: f64 = 9_223_372_036_854_775_808.0; // 2^63
    if v.is_nan() || v < LIMIT {
        c_double_to_i64(v) as u64
    } else {
        (c_double_to_i64(v - LIMIT) as u64) ^ (1u64 << 63)
    }
}

/// Whether a longitude/latitude pair can be stored (GEOADD and search centres).
pub fn valid_lonlat(lon: f64, lat: f64) -> bool {
    (LON_MIN..=LON_MAX).contains(&lon) && (LAT_MIN..=LAT_MAX).contains(&lat)
}

/// The cell of `step` bits per coordinate holding the point, over the given ranges; None outside
/// the storable limits or the ranges.
fn encode_in(lon_range: Span, lat_range: Span, lon: f64, lat: f64, step: u8) -> Option<Cell> {
    if step == 0 || step > 32 || !valid_lonlat(lon, lat) {
        return None;
    }
    if lat < lat_range.min || lat > lat_range.max || lon < lon_range.min || lon > lon_range.max {
        return None;
    }
    let mut lat_offset = (lat - lat_range.min) / (lat_range.max - lat_range.min);
    let mut lon_offset = (lon - lon_range.min) / (lon_range.max - lon_range.min);
    let scale = (1u64 << step) as f64;
    lat_offset *= scale;
    lon_offset *= scale;
    Some(Cell { bits: interleave(to_u32(lat_offset), to_u32(lon_offset)), step })
}

/// The WGS84 cell of `step` bits per coordinate holding the point.
pub fn encode(lon: f64, lat: f64, step: u8) -> Option<Cell> {
    encode_in(WGS84_LON, WGS84_LAT, lon, lat, step)
}

/// The score GEOADD stores for a valid position.
pub fn encode_score(lon: f64, lat: f64) -> Option<u64> {
    encode(lon, lat, STEP_MAX).map(|c| c.score_range().0)
}

/// The extent of a WGS84 cell.
pub fn decode(cell: Cell) -> Area {
    decode_in(WGS84_LON, WGS84_LAT, cell)
}

fn decode_in(lon_range: Span, lat_range: Span, cell: Cell) -> Area {
    let (ilat, ilon) = deinterleave(cell.bits);
    let lat_scale = lat_range.max - lat_range.min;
    let lon_scale = lon_range.max - lon_range.min;
    let div = (1u64 << cell.step.min(63)) as f64;
    let at = |i: u32, scale: f64, min: f64| min + (i as f64 * 1.0 / div) * scale;
    Area {
        lat: Span { min: at(ilat, lat_scale, lat_range.min), max: at(ilat.wrapping_add(1), lat_scale, lat_range.min) },
        lon: Span { min: at(ilon, lon_scale, lon_range.min), max: at(ilon.wrapping_add(1), lon_scale, lon_range.min) },
    }
}

/// The position a score stands for: the centre of its 26-bit cell, clamped to the storable
/// limits. Any score decodes (scores not written by GEOADD give odd but defined positions).
pub fn decode_score(score: f64) -> (f64, f64) {
    let area = decode(Cell { bits: c_double_to_u64(score), step: STEP_MAX });
    let lon = ((area.lon.min + area.lon.max) / 2.0).clamp(LON_MIN, LON_MAX);
    let lat = ((area.lat.min + area.lat.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    (lon, lat)
}

/// The 11-character standard geohash of a stored score (GEOHASH): the decoded position encoded
/// again over latitude [-90, 90]; the eleventh character carries no bits and is always `0`.
pub fn geohash_string(score: f64) -> [u8; 11] {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let (lon, lat) = decode_score(score);
    let bits = encode_in(WGS84_LON, STANDARD_LAT, lon, lat, STEP_MAX).map_or(0, |c| c.bits);
    let mut out = [b'0'; 11];
    for (i, c) in out.iter_mut().enumerate().take(10) {
        let idx = (bits >> (52 - (i + 1) * 5)) & 0x1f;
        *c = ALPHABET[idx as usize];
    }
    out
}

/// Great-circle distance in metres (haversine), longitude first.
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let lat1r = deg_rad(lat1);
    let lon1r = deg_rad(lon1);
    let lat2r = deg_rad(lat2);
    let lon2r = deg_rad(lon2);
    let u = ((lat2r - lat1r) / 2.0).sin();
    let v = ((lon2r - lon1r) / 2.0).sin();
    2.0 * EARTH_RADIUS_M * (u * u + lat1r.cos() * lat2r.cos() * v * v).sqrt().asin()
}

/// The eight neighbours of a cell, wrapping around at the edges of the bit range.
#[derive(Debug, Clone, Copy, Default)]
pub struct Neighbours {
    pub north: Cell,
    pub south: Cell,
    pub east: Cell,
    pub west: Cell,
    pub north_east: Cell,
    pub north_west: Cell,
    pub south_east: Cell,
    pub south_west: Cell,
}

const ODD: u64 = 0xaaaa_aaaa_aaaa_aaaa;
const EVEN: u64 = 0x5555_5555_5555_5555;

/// Moves one cell along the bits selected by `mine` (odd: longitude, even: latitude).
fn shift_cell(cell: Cell, mine: u64, towards_positive: bool) -> Cell {
    let other = !mine;
    let drop = 64 - 2 * cell.step.clamp(1, 32) as u32;
    let mut v = cell.bits & mine;
    let keep = cell.bits & other;
    // The other coordinate's bits, set to 1 inside this cell's width, carry an increment (or
    // borrow a decrement) across them.
    let fill = other >> drop;
    if towards_positive {
        v = v.wrapping_add(fill.wrapping_add(1));
    } else {
        v |= fill;
        v = v.wrapping_sub(fill.wrapping_add(1));
    }
    v &= mine >> drop;
    Cell { bits: v | keep, step: cell.step }
}

fn east_west(cell: Cell, d: i8) -> Cell {
    if d == 0 {
        cell
    } else {
        shift_cell(cell, ODD, d > 0)
    }
}

fn north_south(cell: Cell, d: i8) -> Cell {
    if d == 0 {
        cell
    } else {
        shift_cell(cell, EVEN, d > 0)
    }
}

pub fn neighbours(cell: Cell) -> Neighbours {
    let at = |dx: i8, dy: i8| north_south(east_west(cell, dx), dy);
    Neighbours {
        east: at(1, 0),
        west: at(-1, 0),
        south: at(0, -1),
        north: at(0, 1),
        north_west: at(-1, 1),
        south_west: at(-1, -1),
        north_east: at(1, 1),
        south_east: at(1, -1),
    }
}

/// What is searched: a circle or an axis-aligned box around a centre, sizes in the unit whose
/// length in metres is `to_meters`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Shape {
    Radius(f64),
    Box { width: f64, height: f64 },
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Search {
    pub lon: f64,
    pub lat: f64,
    pub shape: Shape,
    pub to_meters: f64,
}

impl Search {
    /// `[min_lon, min_lat, max_lon, max_lat]` of the searched region.
    fn bounding_box(&self) -> [f64; 4] {
        let (h, w) = match self.shape {
            Shape::Radius(r) => (r, r),
            Shape::Box { width, height } => (height / 2.0, width / 2.0),
        };
        let height = self.to_meters * h;
        let width = self.to_meters * w;
        let lat_delta = rad_deg(height / EARTH_RADIUS_M);
        let lon_delta_top = rad_deg(width / EARTH_RADIUS_M / deg_rad(self.lat + lat_delta).cos());
        let lon_delta_bottom = rad_deg(width / EARTH_RADIUS_M / deg_rad(self.lat - lat_delta).cos());
        // Meridians converge towards the pole: the wider edge is the one nearer the equator.
        let delta = if self.lat < 0.0 { lon_delta_bottom } else { lon_delta_top };
        [self.lon - delta, self.lat - lat_delta, self.lon + delta, self.lat + lat_delta]
    }

    /// The cells to scan, in the order Redis scans them: centre, N, S, E, W, NE, NW, SE, SW.
    /// Excluded neighbours are `Cell::NONE`.
    pub fn cells(&self) -> [Cell; 9] {
        let [min_lon, min_lat, max_lon, max_lat] = self.bounding_box();
        let radius = match self.shape {
            Shape::Radius(r) => r,
            Shape::Box { width, height } => ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt(),
        } * self.to_meters;
        let mut steps = estimate_steps(radius, self.lat);
        let mut cell = encode(self.lon, self.lat, steps).unwrap_or_default();
        let mut n = neighbours(cell);
        let mut area = decode(cell);

        // Near a cell edge the estimated step may leave part of the region outside the nine
        // cells: then one step coarser.
        let too_fine = decode(n.north).lat.max < max_lat
            || decode(n.south).lat.min > min_lat
            || decode(n.east).lon.max < max_lon
            || decode(n.west).lon.min > min_lon;
        if steps > 1 && too_fine {
            steps -= 1;
            cell = encode(self.lon, self.lat, steps).unwrap_or_default();
            n = neighbours(cell);
            area = decode(cell);
        }

        // Drop the neighbours the region cannot reach.
        if steps >= 2 {
            if area.lat.min < min_lat {
                n.south = Cell::NONE;
                n.south_west = Cell::NONE;
                n.south_east = Cell::NONE;
            }
            if area.lat.max > max_lat {
                n.north = Cell::NONE;
                n.north_east = Cell::NONE;
                n.north_west = Cell::NONE;
            }
            if area.lon.min < min_lon {
                n.west = Cell::NONE;
                n.south_west = Cell::NONE;
                n.north_west = Cell::NONE;
            }
            if area.lon.max > max_lon {
                n.east = Cell::NONE;
                n.south_east = Cell::NONE;
                n.north_east = Cell::NONE;
            }
        }
        [cell, n.north, n.south, n.east, n.west, n.north_east, n.north_west, n.south_east, n.south_west]
    }

    /// The distance in metres from the centre to the point when the point is inside the shape.
    pub fn contains(&self, lon: f64, lat: f64) -> Option<f64> {
        match self.shape {
            Shape::Radius(r) => {
                let d = distance(self.lon, self.lat, lon, lat);
                // A NaN distance (rounding past 1 before asin) counts as inside, as in Redis.
                match d.partial_cmp(&(r * self.to_meters)) {
                    Some(std::cmp::Ordering::Greater) => None,
                    _ => Some(d),
                }
            }
            Shape::Box { width, height } => {
                let (width, height) = (width * self.to_meters, height * self.to_meters);
                let lon_distance = distance(lon, lat, self.lon, lat);
                let lat_distance = distance(lon, lat, lon, self.lat);
                if lon_distance > width / 2.0 || lat_distance > height / 2.0 {
                    return None;
                }
                Some(distance(self.lon, self.lat, lon, lat))
            }
        }
    }
}

/// Bits per coordinate for cells about the size of the search radius (coarser towards the poles).
pub fn estimate_steps(mut range_m: f64, lat: f64) -> u8 {
    if range_m == 0.0 {
        return STEP_MAX;
    }
    let mut step: i32 = 1;
    while range_m < MERCATOR_MAX {
        range_m *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, STEP_MAX as i32) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleave_round_trips() {
        for &(a, b) in &[(0u32, 0u32), (1, 0), (0, 1), (0x3ff_ffff, 0x155_5555), (u32::MAX, 7)] {
            assert_eq!(deinterleave(interleave(a, b)), (a, b));
        }
        assert_eq!(interleave(0, 1), 2);
        assert_eq!(interleave(1, 0), 1);
    }

    #[test]
    fn scores_match_redis() {
        // Values redis-server 7.0 stores for these GEOADDs.
        assert_eq!(encode_score(13.361389, 38.115556), Some(3479099956230698));
        assert_eq!(encode_score(15.087269, 37.502669), Some(3479447370796909));
        assert_eq!(encode_score(180.0, 85.05112878), Some(13510798882111488));
        assert_eq!(encode_score(-180.0, -85.05112878), Some(0));
        assert_eq!(encode_score(200.0, 0.0), None);
        assert_eq!(&geohash_string(3479099956230698.0), b"sqc8b49rny0");
        assert_eq!(&geohash_string(13510798882111488.0), b"bp05b5048p0");
        assert_eq!(&geohash_string(0.0), b"00bh0hbj200");
    }

    #[test]
    fn c_casts() {
        assert_eq!(c_double_to_u64(-1.0), u64::MAX);
        assert_eq!(c_double_to_u64(f64::INFINITY), 0);
        assert_eq!(c_double_to_u64(1.5), 1);
        assert_eq!(c_double_to_u64(1e19), 10_000_000_000_000_000_000);
        assert_eq!(c_double_to_i64(-1e300), i64::MIN);
    }

    #[test]
    fn neighbours_wrap() {
        let c = Cell { bits: 0, step: 1 };
        let n = neighbours(c);
        assert_eq!(n.north.bits, 1);
        assert_eq!(n.south.bits, 1);
        assert_eq!(n.east.bits, 2);
        assert_eq!(n.west.bits, 2);
        assert_eq!(n.north_east.bits, 3);
    }
}
