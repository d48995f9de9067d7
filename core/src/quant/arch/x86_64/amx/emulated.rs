//! The tile instructions' semantics in scalar Rust, as the Intel SDM (vol. 2) defines them, for
//! testing the AMX kernels on CPUs without AMX. Palette 1: eight tiles of up to 16 rows of 64
//! bytes; a write to a row zeroes its bytes past `colsb` (`write_row_and_zero`), and rows past a
//! tile's configured rows are zeroed (`zero_upper_rows`). What would fault on hardware (#GP for a
//! bad configuration, #UD for an unconfigured tile or mismatched shapes) panics here, so that a
//! test finds it.

use super::tiles::{Tile, TileConfig, Tiles};

/// Palette 1's limits (CPUID leaf 1DH): rows per tile, bytes per row, tiles.
const MAX_ROWS: usize = 16;
const MAX_COLSB: usize = 64;
const TILES: usize = 8;
/// The multiplier's limits (CPUID leaf 1EH): `tmul_maxk` rows, `tmul_maxn` bytes.
const TMUL_MAXK: usize = 16;
const TMUL_MAXN: usize = 64;

/// Eight tile registers and their configuration.
pub(super) struct Emulated {
    /// `(rows, colsb)` per tile; `None` in the initial state (no configuration).
    shapes: Option<[(usize, usize); TILES]>,
    pub(super) data: [[[u8; MAX_COLSB]; MAX_ROWS]; TILES],
}

impl Emulated {
    pub(super) fn new() -> Emulated {
        Emulated {
            shapes: None,
            data: [[[0; MAX_COLSB]; MAX_ROWS]; TILES],
        }
    }

    /// Tile `t`'s configured `(rows, colsb)`; #UD (a panic) if the tiles are not configured or
    /// `t` is not.
    fn shape(&self, t: usize) -> (usize, usize) {
        let shapes = self
            .shapes
            .expect("#UD: tile instruction without a configuration");
        let (rows, colsb) = shapes[t];
        assert!(rows > 0 && colsb > 0, "#UD: tile {t} not configured");
        (rows, colsb)
    }

    /// Writes `bytes` to row `r` of tile `t` and zeroes the rest of the row.
    fn write_row_and_zero(&mut self, t: usize, r: usize, bytes: &[u8]) {
        let row = &mut self.data[t][r];
        row.fill(0);
        row[..bytes.len()].copy_from_slice(bytes);
    }

    /// Zeroes rows `rows..` of tile `t`.
    fn zero_upper_rows(&mut self, t: usize, rows: usize) {
        for row in &mut self.data[t][rows..] {
            row.fill(0);
        }
    }

    /// TDPBSSD on any three tiles (the trait's `dot` takes the kernels' fixed triples).
    pub(super) fn dpbssd(&mut self, c: usize, a: usize, b: usize) {
        assert!(
            c != a && c != b && a != b,
            "#UD: TDPBSSD operands must differ"
        );
        let (c_rows, c_colsb) = self.shape(c);
        let (a_rows, a_colsb) = self.shape(a);
        let (b_rows, b_colsb) = self.shape(b);
        // #UD conditions: C is M × N dwords, A M × K dwords, B K × N dwords, within the limits.
        assert_eq!(c_rows, a_rows, "#UD: C.rows != A.rows");
        assert_eq!(c_colsb, b_colsb, "#UD: C.colsb != B.colsb");
        assert_eq!(a_colsb / 4, b_rows, "#UD: A.colsb / 4 != B.rows");
        assert!(
            c_colsb <= TMUL_MAXN && b_colsb <= TMUL_MAXN,
            "#UD: N > tmul_maxn"
        );
        assert!(
            a_colsb / 4 <= TMUL_MAXK && b_rows <= TMUL_MAXK,
            "#UD: K > tmul_maxk"
        );
        for m in 0..c_rows {
            let mut tmp = [0i32; MAX_COLSB / 4];
            for (n, dword) in tmp.iter_mut().enumerate() {
                let bytes = &self.data[c][m][4 * n..4 * n + 4];
                *dword = i32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
            }
            for k in 0..a_colsb / 4 {
                for (n, dword) in tmp.iter_mut().enumerate().take(c_colsb / 4) {
                    // DPBD: four products of sign-extended bytes, added to the dword in 32 bits.
                    let mut sum = *dword;
                    for i in 0..4 {
                        let x = self.data[a][m][4 * k + i] as i8 as i32;
                        let y = self.data[b][k][4 * n + i] as i8 as i32;
                        sum = sum.wrapping_add(x * y);
                    }
                    *dword = sum;
                }
            }
            let mut row = [0u8; MAX_COLSB];
            for (n, dword) in tmp.iter().enumerate() {
                row[4 * n..4 * n + 4].copy_from_slice(&dword.to_le_bytes());
            }
            self.write_row_and_zero(c, m, &row[..c_colsb]);
        }
        self.zero_upper_rows(c, c_rows);
    }
}

impl Tiles for Emulated {
    fn configure(&mut self, config: &TileConfig) {
        let b = &config.bytes;
        if b[0] == 0 {
            // Palette 0: the initial state.
            self.release();
            return;
        }
        assert_eq!(b[0], 1, "#GP: palette {} is not supported", b[0]);
        assert_eq!(b[1], 0, "start_row is for restarts only");
        let reserved = b[2..16].iter().chain(&b[32..48]).chain(&b[56..64]);
        assert!(
            reserved.into_iter().all(|&x| x == 0),
            "#GP: reserved bytes set"
        );
        let shapes: [(usize, usize); TILES] = core::array::from_fn(|t| config.shape(t));
        for (t, &(rows, colsb)) in shapes.iter().enumerate() {
            assert!(
                rows <= MAX_ROWS && colsb <= MAX_COLSB,
                "#GP: tile {t} too large"
            );
            assert_eq!(rows == 0, colsb == 0, "#GP: tile {t} half configured");
        }
        self.shapes = Some(shapes);
        self.data = [[[0; MAX_COLSB]; MAX_ROWS]; TILES];
    }

    fn zero(&mut self, t: Tile) {
        let _ = self.shape(t as usize);
        self.data[t as usize] = [[0; MAX_COLSB]; MAX_ROWS];
    }

    fn load(&mut self, t: Tile, src: &[u8], stride: usize) {
        let t = t as usize;
        let (rows, colsb) = self.shape(t);
        for r in 0..rows {
            let at = r * stride;
            self.write_row_and_zero(t, r, &src[at..at + colsb]);
        }
        self.zero_upper_rows(t, rows);
    }

    fn dot(&mut self, c: Tile) {
        let (a, b) = c.sources();
        self.dpbssd(c as usize, a as usize, b as usize);
    }

    fn store(&mut self, t: Tile, dst: &mut [u8], stride: usize) {
        let t = t as usize;
        let (rows, colsb) = self.shape(t);
        for r in 0..rows {
            let at = r * stride;
            dst[at..at + colsb].copy_from_slice(&self.data[t][r][..colsb]);
        }
    }

    fn release(&mut self) {
        self.shapes = None;
        self.data = [[[0; MAX_COLSB]; MAX_ROWS]; TILES];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A configuration of tiles 0, 2 and 4 (A, B, C) of `rows × colsb` each.
    fn config(a: (u8, u16), b: (u8, u16), c: (u8, u16)) -> TileConfig {
        let none = (0, 0);
        TileConfig::palette1([a, none, b, none, c, none, none, none])
    }

    #[test]
    fn config_bytes_sit_where_the_sdm_puts_them() {
        let cfg = TileConfig::palette1([
            (1, 2),
            (3, 4),
            (5, 6),
            (7, 8),
            (9, 10),
            (11, 12),
            (13, 14),
            (16, 300),
        ]);
        assert_eq!(cfg.bytes[0], 1);
        // colsb of tiles 0, 2 and 7 at bytes 16, 20 and 30 (little-endian u16).
        assert_eq!(cfg.bytes[16..18], [2, 0]);
        assert_eq!(cfg.bytes[20..22], [6, 0]);
        assert_eq!(cfg.bytes[30..32], [44, 1]);
        // rows of tiles 0 and 7 at bytes 48 and 55.
        assert_eq!(cfg.bytes[48], 1);
        assert_eq!(cfg.bytes[55], 16);
        assert!(cfg.bytes[1..16]
            .iter()
            .chain(&cfg.bytes[32..48])
            .chain(&cfg.bytes[56..])
            .all(|&b| b == 0));
    }

    /// A 2 × 2-dword tile against a 2 × 2-dword one, into an accumulator with a starting value;
    /// every product and sum worked out by hand.
    #[test]
    fn dpbssd_of_small_tiles_by_hand() {
        let mut t = Emulated::new();
        t.configure(&config((2, 8), (2, 8), (2, 8)));
        // A rows (two dwords each).
        let a: [i8; 16] = [1, 2, 3, 4, -1, -2, -3, -4, 127, -128, 0, 0, 0, 0, 0, 1];
        // B rows: row k holds dword k of both columns.
        let b: [i8; 16] = [1, 1, 1, 1, 2, 0, 0, 0, 1, 0, 0, 0, -128, -128, -128, -128];
        let bytes = |v: &[i8]| v.iter().map(|&x| x as u8).collect::<std::vec::Vec<u8>>();
        // The A rows 8 bytes apart, the B rows 12 apart (a stride past the row's end).
        t.load(Tile::A0, &bytes(&a), 8);
        let mut b_strided = [0u8; 20];
        b_strided[..8].copy_from_slice(&bytes(&b[..8]));
        b_strided[12..20].copy_from_slice(&bytes(&b[8..]));
        t.load(Tile::B0, &b_strided, 12);
        let c0: [i32; 4] = [1000, -5, i32::MAX, i32::MAX];
        let c_bytes: std::vec::Vec<u8> = c0.iter().flat_map(|v| v.to_le_bytes()).collect();
        t.load(Tile::C00, &c_bytes, 8);
        t.dot(Tile::C00);
        let mut out = [0u8; 16];
        t.store(Tile::C00, &mut out, 8);
        let c: std::vec::Vec<i32> = out
            .chunks_exact(4)
            .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        // C[0][0] = 1000 + (1+2+3+4)·1 + (-1)·1 = 1009; C[0][1] = -5 + 1·2 + (1+2+3+4)·128 = 1277;
        // C[1][0] = MAX + (127 - 128) + 0 = MAX - 1; C[1][1] = MAX + 254 - 128 wraps to MIN + 125.
        assert_eq!(c, [1009, 1277, i32::MAX - 1, i32::MIN + 125]);
        // The rest of each row and the rows past the shape are zero.
        assert!(t.data[4][0][8..].iter().all(|&x| x == 0));
        assert!(t.data[4][2..].iter().flatten().all(|&x| x == 0));
    }

    /// Loads zero what the shape leaves out, and a store writes only the shape (with the stride).
    #[test]
    fn loads_zero_the_rest_and_stores_keep_the_gaps() {
        let mut t = Emulated::new();
        t.configure(&config((2, 4), (1, 4), (2, 4)));
        t.data[0] = [[0xaa; 64]; 16];
        t.load(Tile::A0, &[1, 2, 3, 4, 9, 9, 5, 6, 7, 8], 6);
        assert_eq!(t.data[0][0][..6], [1, 2, 3, 4, 0, 0]);
        assert_eq!(t.data[0][1][..6], [5, 6, 7, 8, 0, 0]);
        assert!(t.data[0][2..].iter().flatten().all(|&x| x == 0));
        let mut out = [0x55u8; 10];
        t.store(Tile::A0, &mut out, 6);
        assert_eq!(out, [1, 2, 3, 4, 0x55, 0x55, 5, 6, 7, 8]);
        t.zero(Tile::A0);
        t.store(Tile::A0, &mut out, 6);
        assert_eq!(out, [0, 0, 0, 0, 0x55, 0x55, 0, 0, 0, 0]);
    }

    #[test]
    #[should_panic(expected = "A.colsb / 4 != B.rows")]
    fn mismatched_k_is_undefined() {
        let mut t = Emulated::new();
        t.configure(&config((2, 8), (3, 8), (2, 8)));
        t.dot(Tile::C00);
    }

    #[test]
    #[should_panic(expected = "without a configuration")]
    fn released_tiles_fault() {
        let mut t = Emulated::new();
        t.configure(&config((2, 8), (2, 8), (2, 8)));
        t.release();
        t.zero(Tile::A0);
    }

    #[test]
    #[should_panic(expected = "too large")]
    fn rows_past_the_palette_fault() {
        Emulated::new().configure(&config((17, 8), (2, 8), (17, 8)));
    }
}
