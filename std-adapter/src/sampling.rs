//! Choosing the next token from a position's logits: greedy (the largest logit; among equal ones
//! the lowest id), or drawn with a temperature from the `top_k` largest, by a seeded generator, so
//! the same seed gives the same tokens.
//!
//! The draw is made in f64 from `exp` of `(logit - largest) / temperature`; the generator is
//! SplitMix64 (one 64-bit state, 53-bit uniform floats), small enough to keep here rather than
//! depend on a random-number crate for one function.

/// How the next token is chosen.
#[derive(Debug, Clone)]
pub struct Sampler {
    temperature: f64,
    top_k: usize,
    state: u64,
    /// Candidate ids and their weights, reused between calls.
    order: Vec<u32>,
    weights: Vec<f64>,
}

impl Sampler {
    /// Drawn with `temperature` (0 or less: greedy) among the `top_k` largest logits (0: all of
    /// them), the generator seeded with `seed`.
    pub fn new(temperature: f32, top_k: usize, seed: u64) -> Self {
        Self {
            temperature: f64::from(temperature),
            top_k,
            state: seed,
            order: Vec::new(),
            weights: Vec::new(),
        }
    }

    /// Whether the choice is the largest logit every time (no draw).
    pub fn is_greedy(&self) -> bool {
        self.temperature <= 0.0 || self.top_k == 1
    }

    /// The next token's id from `logits` (ids are positions); 0 for empty logits. NaN logits
    /// are never chosen unless every logit is NaN.
    pub fn choose(&mut self, logits: &[f32]) -> u32 {
        if self.is_greedy() || logits.is_empty() {
            return greedy(logits);
        }
        // Largest first, the lower id first among equals: the order does not depend on the sort.
        let by_logit = |a: &u32, b: &u32| {
            let (x, y) = (key(logits, *a), key(logits, *b));
            y.total_cmp(&x).then(a.cmp(b))
        };
        self.order.clear();
        self.order.extend(0..logits.len() as u32);
        let k = if self.top_k == 0 {
            logits.len()
        } else {
            self.top_k.min(logits.len())
        };
        if k < self.order.len() {
            self.order.select_nth_unstable_by(k - 1, by_logit);
            self.order.truncate(k);
        }
        self.order.sort_unstable_by(by_logit);
        let largest = key(logits, self.order[0]);
        let u = self.uniform();
        self.weights.clear();
        self.weights.extend(
            self.order
                .iter()
                .map(|&id| libm::exp((key(logits, id) - largest) / self.temperature)),
        );
        let mut left = u * self.weights.iter().sum::<f64>();
        for (&id, &weight) in self.order.iter().zip(&self.weights) {
            left -= weight;
            if left < 0.0 {
                return id;
            }
        }
        // Rounding left a sliver past the last weight: the last candidate.
        self.order.last().copied().unwrap_or(0)
    }

    /// A uniform draw in [0, 1): SplitMix64's next output, its top 53 bits.
    fn uniform(&mut self) -> f64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// A logit as the draw sees it: NaN as minus infinity.
fn key(logits: &[f32], id: u32) -> f64 {
    let v = logits
        .get(id as usize)
        .copied()
        .unwrap_or(f32::NEG_INFINITY);
    if v.is_nan() {
        f64::NEG_INFINITY
    } else {
        f64::from(v)
    }
}

/// The id of the largest logit, the lowest among equal ones (NaN never wins unless all are NaN).
pub fn greedy(logits: &[f32]) -> u32 {
    let mut best = 0usize;
    for (i, &v) in logits.iter().enumerate() {
        if v > logits[best] || logits[best].is_nan() && !v.is_nan() {
            best = i;
        }
    }
    best as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_takes_the_largest_and_the_lowest_id_among_equals() {
        assert_eq!(greedy(&[1.0, 3.0, 3.0, 2.0]), 1);
        assert_eq!(greedy(&[f32::NAN, -5.0, -7.0]), 1);
        assert_eq!(greedy(&[]), 0);
        let mut s = Sampler::new(0.8, 1, 9);
        assert!(s.is_greedy());
        assert_eq!(s.choose(&[0.0, 0.5, 0.4]), 1);
        let mut s = Sampler::new(0.0, 40, 9);
        assert_eq!(s.choose(&[0.0, 0.5, 0.6]), 2);
    }

    #[test]
    fn the_same_seed_draws_the_same_tokens_and_another_seed_others() {
        let logits: Vec<f32> = (0..100).map(|i| ((i * 37) % 11) as f32 * 0.1).collect();
        let draw = |seed| {
            let mut s = Sampler::new(1.0, 0, seed);
            (0..50).map(|_| s.choose(&logits)).collect::<Vec<u32>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
    }

    #[test]
    fn draws_follow_the_softmax_of_the_scaled_logits() {
        // exp(ln 3) : exp(0) = 3 : 1, so id 1 comes three times in four; at temperature 2 the
        // logits halve: sqrt(3) : 1.
        let logits = [0.0f32, 3f32.ln()];
        for (temperature, want) in [(1.0f32, 0.75), (2.0, 3f64.sqrt() / (1.0 + 3f64.sqrt()))] {
            let mut s = Sampler::new(temperature, 0, 42);
            let ones = (0..20_000).filter(|_| s.choose(&logits) == 1).count();
            let share = ones as f64 / 20_000.0;
            assert!(
                (share - want).abs() < 0.015,
                "{temperature}: {share} vs {want}"
            );
        }
    }

    #[test]
    fn only_the_top_k_are_drawn_and_nan_never() {
        let logits = [0.0f32, 5.0, f32::NAN, 4.9, 4.8, 1.0];
        let mut s = Sampler::new(100.0, 3, 1);
        let mut seen = [0usize; 6];
        for _ in 0..3000 {
            seen[s.choose(&logits) as usize] += 1;
        }
        assert_eq!((seen[0], seen[2], seen[5]), (0, 0, 0), "{seen:?}");
        assert!(seen[1] > 0 && seen[3] > 0 && seen[4] > 0, "{seen:?}");
    }

    #[test]
    fn a_tiny_temperature_is_greedy_and_every_logit_nan_still_gives_an_id() {
        let mut s = Sampler::new(1e-6, 0, 3);
        for _ in 0..100 {
            assert_eq!(s.choose(&[0.0, 1.0, 0.999]), 1);
        }
        let mut s = Sampler::new(1.0, 0, 3);
        assert!(s.choose(&[f32::NAN, f32::NAN]) < 2);
    }
}
