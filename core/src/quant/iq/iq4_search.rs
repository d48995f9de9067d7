//! The IQ4 quantizer shared by IQ4_NL and IQ4_XS: ggml's `quantize_row_iq4_nl_impl` without an
//! importance matrix. Each 32-value group gets a weighted least-squares scale over the 16
//! non-linear levels (weights `x²`), optionally refined by restarting from `2·ntry + 1` nearby
//! scales. Float operations follow ggml's order exactly, unfused.

use super::tables::KVALUES_IQ4NL;
use crate::quant::float::fabsf;

/// ggml's `GROUP_MAX_EPS`: a group whose largest |x| is below this is treated as all zero.
pub(super) const GROUP_MAX_EPS: f32 = 1e-15;

/// IQ4 level `i` as f32.
#[inline(always)]
fn level(i: usize) -> f32 {
    f32::from(KVALUES_IQ4NL[i % 16])
}

/// `best_index_int8` over the IQ4 levels: the index of the level nearest `x` by binary search
/// (below the lowest or above the highest level, the end; NaN gives 15, as in C).
pub(super) fn best_index(x: f32) -> u8 {
    if x <= level(0) {
        return 0;
    }
    if x >= level(15) {
        return 15;
    }
    let (mut ml, mut mu) = (0usize, 15usize);
    while mu - ml > 1 {
        let mav = (ml + mu) / 2;
        if x < level(mav) {
            mu = mav;
        } else {
            ml = mav;
        }
    }
    // Here 0 <= ml < mu <= 15, so `mu - 1` cannot underflow.
    if x - level(mu - 1) < level(mu) - x {
        (mu - 1) as u8
    } else {
        mu as u8
    }
}

/// The scale of one 32-value group, writing its level indices to `levels` (ggml's per-group pass).
/// `None` when the group's largest |x| is below [`GROUP_MAX_EPS`]: ggml then records scale 0 and
/// leaves `levels` untouched.
pub(super) fn group_scale(xb: &[f32; 32], ntry: i32, levels: &mut [u8; 32]) -> Option<f32> {
    let weight = xb.map(|x| x * x);
    let mut amax = 0.0f32;
    let mut max = 0.0f32;
    for &x in xb {
        let ax = fabsf(x);
        if ax > amax {
            amax = ax;
            max = x;
        }
    }
    if amax < GROUP_MAX_EPS {
        return None;
    }
    let mut d = if ntry > 0 {
        -max / level(0)
    } else {
        max / level(0)
    };
    let mut id = 1.0 / d;
    let mut sumqx = 0.0f32;
    let mut sumq2 = 0.0f32;
    for ((l, &x), &w) in levels.iter_mut().zip(xb).zip(&weight) {
        *l = best_index(id * x);
        let q = level(usize::from(*l));
        sumqx += w * q * x;
        sumq2 += w * q * q;
    }
    d = if sumq2 > 0.0 { sumqx / sumq2 } else { 0.0 };
    let mut best = d * sumqx;
    for itry in -ntry..=ntry {
        id = (itry + i32::from(KVALUES_IQ4NL[0])) as f32 / max;
        sumqx = 0.0;
        sumq2 = 0.0;
        for (&x, &w) in xb.iter().zip(&weight) {
            let q = level(usize::from(best_index(id * x)));
            sumqx += w * q * x;
            sumq2 += w * q * q;
        }
        if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    Some(d)
}

/// Packs 32 level indices into 16 bytes: value `j` in the low nibble of byte `j`, value `j + 16`
/// in its high nibble.
pub(super) fn pack_levels(levels: &[u8; 32]) -> [u8; 16] {
    let mut out = [0u8; 16];
    let (low, high) = levels.split_at(16);
    for ((o, &lo), &hi) in out.iter_mut().zip(low).zip(high) {
        *o = lo | (hi << 4);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_index_picks_the_nearest_level() {
        // Levels: -127 -104 -83 -65 -49 -35 -22 -10 1 13 25 38 53 69 89 113.
        assert_eq!(best_index(-200.0), 0);
        assert_eq!(best_index(500.0), 15);
        assert_eq!(best_index(0.0), 8); // |0 - 1| < |0 + 10|
        assert_eq!(best_index(-4.5), 8); // distances 5.5 vs 5.5: not strictly less -> upper level
        assert_eq!(best_index(-4.6), 7);
        assert_eq!(best_index(100.0), 14); // 11 vs 13
        assert_eq!(best_index(f32::NAN), 15);
    }

    #[test]
    fn pack_puts_the_second_half_in_high_nibbles() {
        let mut levels = [0u8; 32];
        levels[0] = 3;
        levels[16] = 12;
        levels[15] = 15;
        let packed = pack_levels(&levels);
        assert_eq!(packed[0], 0xc3);
        assert_eq!(packed[15], 0x0f);
    }
}
