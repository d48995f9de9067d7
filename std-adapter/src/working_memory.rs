//! A model session's working memory (its floats, the KV cache among them, and its scratch bytes),
//! whose size grows with the context a run asks for. It comes from one anonymous memory map, so
//! a size the system cannot give is an error the command reports, not an abort in the allocator,
//! and pages the run never reaches are never made resident (the kernel zero-fills each on first
//! touch, as it does for a large `vec![0; n]`).

use std::fmt;

use memmap2::MmapMut;

/// `floats` f32 followed by `bytes` bytes, zeroed.
#[derive(Debug)]
pub struct WorkingMemory {
    map: Option<MmapMut>,
    floats: usize,
}

/// The system refused the working memory.
#[derive(Debug)]
pub struct NoMemory {
    /// Bytes asked for.
    pub bytes: u128,
    /// Why (the map's error).
    pub source: std::io::Error,
}

impl fmt::Display for NoMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cannot reserve {} of working memory ({})",
            human_bytes(self.bytes),
            self.source
        )
    }
}

impl std::error::Error for NoMemory {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

impl WorkingMemory {
    /// Maps `floats` f32 and `bytes` bytes, zeroed; an error if the sum overflows or the system
    /// refuses it.
    pub fn new(floats: usize, bytes: usize) -> Result<Self, NoMemory> {
        let asked = floats as u128 * 4 + bytes as u128;
        let refused = |source| NoMemory {
            bytes: asked,
            source,
        };
        let total = floats
            .checked_mul(4)
            .and_then(|f| f.checked_add(bytes))
            .ok_or_else(|| refused(std::io::ErrorKind::OutOfMemory.into()))?;
        let map = match total {
            0 => None,
            _ => Some(MmapMut::map_anon(total).map_err(refused)?),
        };
        Ok(Self { map, floats })
    }

    /// The floats and the bytes.
    pub fn parts(&mut self) -> (&mut [f32], &mut [u8]) {
        let Some(map) = self.map.as_mut() else {
            return (&mut [], &mut []);
        };
        let (floats, bytes) = map.split_at_mut(self.floats * 4);
        // A map starts on a page boundary, so its first bytes are aligned for f32.
        (bytemuck::cast_slice_mut(floats), bytes)
    }
}

/// `737664169288` as `687.0 GiB`.
pub fn human_bytes(bytes: u128) -> String {
    const UNITS: [&str; 5] = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} bytes")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parts_are_zeroed_and_of_the_asked_lengths() {
        let mut memory = WorkingMemory::new(1000, 77).unwrap();
        let (floats, bytes) = memory.parts();
        assert_eq!((floats.len(), bytes.len()), (1000, 77));
        assert!(floats.iter().all(|&f| f.to_bits() == 0));
        assert!(bytes.iter().all(|&b| b == 0));
        floats[999] = 1.5;
        bytes[76] = 9;
        let mut empty = WorkingMemory::new(0, 0).unwrap();
        assert_eq!(empty.parts().0.len() + empty.parts().1.len(), 0);
    }

    #[test]
    fn a_size_no_system_can_map_is_an_error_naming_it() {
        // Past the 47-bit user address space of x86_64 and aarch64 Linux, and past isize::MAX.
        for (floats, bytes) in [(1usize << 46, 0usize), (usize::MAX / 2, 0), (usize::MAX, 1)] {
            let e = WorkingMemory::new(floats, bytes).unwrap_err();
            assert_eq!(e.bytes, floats as u128 * 4 + bytes as u128);
            let text = e.to_string();
            assert!(
                text.starts_with("cannot reserve ") && text.contains(" of working memory ("),
                "{text}"
            );
        }
    }

    #[test]
    fn sizes_read_in_binary_units() {
        assert_eq!(human_bytes(0), "0 bytes");
        assert_eq!(human_bytes(1023), "1023 bytes");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(737_664_169_288), "687.0 GiB");
        assert_eq!(human_bytes(1 << 50), "1024.0 TiB");
    }
}
