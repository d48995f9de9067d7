//! The GGML tensor type table: every type code a GGUF file may name, with its block geometry.
//!
//! Codes, block sizes and byte sizes follow ggml's `ggml.h` / `type_traits` (codes 0..=42). Codes that
//! ggml removed (4, 5, 31..=33, 36..=38) are known as removed, so a file naming one is rejected with a
//! precise error instead of being mistaken for an unknown future type.

/// A GGML tensor element type (`enum ggml_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u32)]
#[allow(non_camel_case_types, missing_docs)]
pub enum GgmlType {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    IQ2_XXS = 16,
    IQ2_XS = 17,
    IQ3_XXS = 18,
    IQ1_S = 19,
    IQ4_NL = 20,
    IQ3_S = 21,
    IQ2_S = 22,
    IQ4_XS = 23,
    I8 = 24,
    I16 = 25,
    I32 = 26,
    I64 = 27,
    F64 = 28,
    IQ1_M = 29,
    BF16 = 30,
    TQ1_0 = 34,
    TQ2_0 = 35,
    MXFP4 = 39,
    NVFP4 = 40,
    Q1_0 = 41,
    Q2_0 = 42,
}

/// Why a type code is not a usable [`GgmlType`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum TypeCodeError {
    /// ggml once defined this code and removed it (4, 5, 31..=33, 36..=38).
    Removed,
    /// No ggml version defines this code.
    Unknown,
}

impl GgmlType {
    /// Every type, in code order.
    pub const ALL: [GgmlType; 35] = [
        Self::F32,
        Self::F16,
        Self::Q4_0,
        Self::Q4_1,
        Self::Q5_0,
        Self::Q5_1,
        Self::Q8_0,
        Self::Q8_1,
        Self::Q2_K,
        Self::Q3_K,
        Self::Q4_K,
        Self::Q5_K,
        Self::Q6_K,
        Self::Q8_K,
        Self::IQ2_XXS,
        Self::IQ2_XS,
        Self::IQ3_XXS,
        Self::IQ1_S,
        Self::IQ4_NL,
        Self::IQ3_S,
        Self::IQ2_S,
        Self::IQ4_XS,
        Self::I8,
        Self::I16,
        Self::I32,
        Self::I64,
        Self::F64,
        Self::IQ1_M,
        Self::BF16,
        Self::TQ1_0,
        Self::TQ2_0,
        Self::MXFP4,
        Self::NVFP4,
        Self::Q1_0,
        Self::Q2_0,
    ];

    /// The type with this `ggml_type` code.
    pub const fn from_code(code: u32) -> Result<Self, TypeCodeError> {
        Ok(match code {
            0 => Self::F32,
            1 => Self::F16,
            2 => Self::Q4_0,
            3 => Self::Q4_1,
            6 => Self::Q5_0,
            7 => Self::Q5_1,
            8 => Self::Q8_0,
            9 => Self::Q8_1,
            10 => Self::Q2_K,
            11 => Self::Q3_K,
            12 => Self::Q4_K,
            13 => Self::Q5_K,
            14 => Self::Q6_K,
            15 => Self::Q8_K,
            16 => Self::IQ2_XXS,
            17 => Self::IQ2_XS,
            18 => Self::IQ3_XXS,
            19 => Self::IQ1_S,
            20 => Self::IQ4_NL,
            21 => Self::IQ3_S,
            22 => Self::IQ2_S,
            23 => Self::IQ4_XS,
            24 => Self::I8,
            25 => Self::I16,
            26 => Self::I32,
            27 => Self::I64,
            28 => Self::F64,
            29 => Self::IQ1_M,
            30 => Self::BF16,
            34 => Self::TQ1_0,
            35 => Self::TQ2_0,
            39 => Self::MXFP4,
            40 => Self::NVFP4,
            41 => Self::Q1_0,
            42 => Self::Q2_0,
            4 | 5 | 31..=33 | 36..=38 => return Err(TypeCodeError::Removed),
            _ => return Err(TypeCodeError::Unknown),
        })
    }

    /// The `ggml_type` code.
    pub const fn code(self) -> u32 {
        self as u32
    }

    /// ggml's name for the type (`type_traits[t].type_name`, upper-cased as GGUF tools print it).
    pub const fn name(self) -> &'static str {
        match self {
            Self::F32 => "F32",
            Self::F16 => "F16",
            Self::Q4_0 => "Q4_0",
            Self::Q4_1 => "Q4_1",
            Self::Q5_0 => "Q5_0",
            Self::Q5_1 => "Q5_1",
            Self::Q8_0 => "Q8_0",
            Self::Q8_1 => "Q8_1",
            Self::Q2_K => "Q2_K",
            Self::Q3_K => "Q3_K",
            Self::Q4_K => "Q4_K",
            Self::Q5_K => "Q5_K",
            Self::Q6_K => "Q6_K",
            Self::Q8_K => "Q8_K",
            Self::IQ2_XXS => "IQ2_XXS",
            Self::IQ2_XS => "IQ2_XS",
            Self::IQ3_XXS => "IQ3_XXS",
            Self::IQ1_S => "IQ1_S",
            Self::IQ4_NL => "IQ4_NL",
            Self::IQ3_S => "IQ3_S",
            Self::IQ2_S => "IQ2_S",
            Self::IQ4_XS => "IQ4_XS",
            Self::I8 => "I8",
            Self::I16 => "I16",
            Self::I32 => "I32",
            Self::I64 => "I64",
            Self::F64 => "F64",
            Self::IQ1_M => "IQ1_M",
            Self::BF16 => "BF16",
            Self::TQ1_0 => "TQ1_0",
            Self::TQ2_0 => "TQ2_0",
            Self::MXFP4 => "MXFP4",
            Self::NVFP4 => "NVFP4",
            Self::Q1_0 => "Q1_0",
            Self::Q2_0 => "Q2_0",
        }
    }

    /// The type whose [`name`](Self::name) is `name` (ASCII case-insensitive).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(name))
    }

    /// Elements per block (1 for the plain numeric types).
    pub const fn block_size(self) -> u32 {
        match self {
            Self::F32
            | Self::F16
            | Self::BF16
            | Self::I8
            | Self::I16
            | Self::I32
            | Self::I64
            | Self::F64 => 1,
            Self::Q4_0
            | Self::Q4_1
            | Self::Q5_0
            | Self::Q5_1
            | Self::Q8_0
            | Self::Q8_1
            | Self::IQ4_NL
            | Self::MXFP4 => 32,
            Self::NVFP4 | Self::Q2_0 => 64,
            Self::Q1_0 => 128,
            Self::Q2_K
            | Self::Q3_K
            | Self::Q4_K
            | Self::Q5_K
            | Self::Q6_K
            | Self::Q8_K
            | Self::IQ2_XXS
            | Self::IQ2_XS
            | Self::IQ3_XXS
            | Self::IQ1_S
            | Self::IQ3_S
            | Self::IQ2_S
            | Self::IQ4_XS
            | Self::IQ1_M
            | Self::TQ1_0
            | Self::TQ2_0 => 256,
        }
    }

    /// Bytes per block (`sizeof(block_*)`).
    pub const fn block_bytes(self) -> u32 {
        match self {
            Self::F32 => 4,
            Self::F16 => 2,
            Self::Q4_0 => 18,
            Self::Q4_1 => 20,
            Self::Q5_0 => 22,
            Self::Q5_1 => 24,
            Self::Q8_0 => 34,
            Self::Q8_1 => 36,
            Self::Q2_K => 84,
            Self::Q3_K => 110,
            Self::Q4_K => 144,
            Self::Q5_K => 176,
            Self::Q6_K => 210,
            Self::Q8_K => 292,
            Self::IQ2_XXS => 66,
            Self::IQ2_XS => 74,
            Self::IQ3_XXS => 98,
            Self::IQ1_S => 50,
            Self::IQ4_NL => 18,
            Self::IQ3_S => 110,
            Self::IQ2_S => 82,
            Self::IQ4_XS => 136,
            Self::I8 => 1,
            Self::I16 => 2,
            Self::I32 => 4,
            Self::I64 => 8,
            Self::F64 => 8,
            Self::IQ1_M => 56,
            Self::BF16 => 2,
            Self::TQ1_0 => 54,
            Self::TQ2_0 => 66,
            Self::MXFP4 => 17,
            Self::NVFP4 => 36,
            Self::Q1_0 => 18,
            Self::Q2_0 => 18,
        }
    }

    /// Whether the type is a block-quantized format (block size above 1).
    pub const fn is_quantized(self) -> bool {
        self.block_size() > 1
    }

    /// Bytes that `elements` values take, or `None` if `elements` is not a whole number of blocks or
    /// the byte count overflows `u64`.
    pub const fn bytes_for(self, elements: u64) -> Option<u64> {
        let block = self.block_size() as u64;
        if !elements.is_multiple_of(block) {
            return None;
        }
        (elements / block).checked_mul(self.block_bytes() as u64)
    }
}

/// The name, honouring width, fill and alignment (`{:<6}` pads like a `&str`).
impl core::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.pad(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_pads_like_a_str() {
        use std::format;
        assert_eq!(format!("[{:<6}]", GgmlType::Q4_K), "[Q4_K  ]");
        assert_eq!(format!("[{:>6}]", GgmlType::F32), "[   F32]");
        assert_eq!(format!("[{:^7}]", GgmlType::Q8_0), "[ Q8_0  ]");
        assert_eq!(format!("[{:.2}]", GgmlType::IQ2_XXS), "[IQ]");
        assert_eq!(format!("{}", GgmlType::BF16), "BF16");
    }

    #[test]
    fn every_code_round_trips_and_removed_codes_are_known() {
        let mut known = 0;
        for code in 0..64u32 {
            match GgmlType::from_code(code) {
                Ok(t) => {
                    assert_eq!(t.code(), code);
                    assert_eq!(GgmlType::from_name(t.name()), Some(t));
                    known += 1;
                }
                Err(TypeCodeError::Removed) => assert!(matches!(code, 4 | 5 | 31..=33 | 36..=38)),
                Err(TypeCodeError::Unknown) => assert!(code >= 43),
            }
        }
        assert_eq!(known, GgmlType::ALL.len());
    }

    #[test]
    fn bytes_for_checks_blocks_and_overflow() {
        assert_eq!(GgmlType::Q8_0.bytes_for(49152 * 576), Some(30081024));
        assert_eq!(GgmlType::Q4_K.bytes_for(255), None);
        assert_eq!(GgmlType::F32.bytes_for(1 << 62), None);
        assert_eq!(GgmlType::F32.bytes_for(0), Some(0));
    }
}
