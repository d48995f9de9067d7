//! `miniquant::quant::validate` and `miniquant validate --data` against ggml's own
//! `ggml_validate_row_data` (compiled from the same sources as the kernel oracle): the same verdict
//! for every type on random blocks (whose scale fields are often set to NaN, infinities, 0xFF
//! exponents and other edge patterns), and on the tensors of a GGUF file of ours, clean and with
//! NaN / inf values and scales planted in several types.

use miniquant::quant::validate::first_invalid;
use miniquant::GgmlType;
use miniquant_std::validate::{check_data, DataProblemKind};
use miniquant_std::writer::GgufWriter;
use miniquant_std::GgufFile;
use miniquant_tests::data::Rng;
use miniquant_tests::ggml::ggml_validate;

/// f16 / bf16 / f32 bit patterns that sit on the edges of "finite".
const SPECIAL_U16: [u16; 8] = [
    0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xffff, 0x7bff, 0x7f80, 0x7fc0,
];

/// Random blocks of `t`, then some of their 2-byte words (every f16 scale lies on an even
/// offset, near a block's start or end) replaced by edge patterns; for Q8_K the same in its f32 scale, for MXFP4 the exponent
/// byte set to 0xFF or 0xFE sometimes.
fn random_blocks(t: GgmlType, blocks: usize, rng: &mut Rng) -> Vec<u8> {
    let size = t.block_bytes() as usize;
    let mut bytes: Vec<u8> = (0..blocks * size).map(|_| rng.next_u64() as u8).collect();
    // Scales that random bytes make NaN or inf 1 time in 32 would hide the clean case: calm most
    // blocks down by clearing the top exponent bit of every 16-bit word, then plant edges.
    if rng.below(2) == 0 {
        for word in bytes.chunks_exact_mut(2) {
            word[1] &= 0x3f;
        }
    }
    // (A type of 1-byte blocks has no 2-byte scale: I8.)
    let plants = if bytes.len() < 2 { 0 } else { rng.below(3) };
    for _ in 0..plants {
        // Scales sit at a block's start or end: aim there most of the time, anywhere otherwise.
        let block = rng.below(blocks as u64) as usize * size;
        let from_end = |back: usize| size.saturating_sub(back) & !1;
        let near_edges = [0, 2, from_end(2), from_end(4), from_end(6), from_end(8)];
        let at = match rng.below(8) as usize {
            i if i < near_edges.len() && size >= 2 => block + near_edges[i],
            _ => rng.below(bytes.len() as u64 / 2) as usize * 2,
        };
        let at = at.min(bytes.len() - 2);
        let pattern = SPECIAL_U16[rng.below(SPECIAL_U16.len() as u64) as usize];
        bytes[at..at + 2].copy_from_slice(&pattern.to_le_bytes());
    }
    // Q8_K's scale is an f32 (the block's first four bytes): plant an edge in its high half.
    if t == GgmlType::Q8_K && rng.below(2) == 0 {
        let at = rng.below(blocks as u64) as usize * size;
        let pattern = SPECIAL_U16[rng.below(SPECIAL_U16.len() as u64) as usize];
        bytes[at + 2..at + 4].copy_from_slice(&pattern.to_le_bytes());
        if rng.below(2) == 0 {
            bytes[at..at + 2].fill(0);
        }
    }
    if t == GgmlType::MXFP4 && rng.below(2) == 0 {
        let at = rng.below(blocks as u64) as usize * size;
        bytes[at] = if rng.below(2) == 0 { 0xff } else { 0xfe };
    }
    bytes
}

#[test]
fn verdicts_equal_ggml_for_every_type_on_random_blocks() {
    let mut rng = Rng::new(0x7661_6c69_6461_7465);
    let mut summary = Vec::new();
    for t in GgmlType::ALL {
        let (mut refused, mut accepted) = (0, 0);
        for round in 0..400 {
            let blocks = 1 + rng.below(6) as usize;
            let bytes = random_blocks(t, blocks, &mut rng);
            let ours = first_invalid(t, &bytes).expect("whole blocks");
            let theirs = ggml_validate(t, &bytes);
            assert_eq!(
                ours.is_none(),
                theirs,
                "{t}, round {round}: ours {ours:?}, ggml accepts: {theirs}; bytes {bytes:02x?}"
            );
            if theirs {
                accepted += 1;
            } else {
                refused += 1;
            }
        }
        summary.push(format!("{t}: {accepted} accepted, {refused} refused"));
        // Both verdicts must occur, or the comparison proves little (integer types and NVFP4
        // have nothing to refuse; Q8_1 is always refused).
        let nothing_to_check = matches!(
            t,
            GgmlType::I8 | GgmlType::I16 | GgmlType::I32 | GgmlType::I64 | GgmlType::NVFP4
        );
        if nothing_to_check {
            assert_eq!(refused, 0, "{t}");
        } else if t == GgmlType::Q8_1 {
            assert_eq!(accepted, 0, "{t}");
        } else {
            assert!(
                accepted > 20 && refused > 20,
                "{t}: {accepted} accepted, {refused} refused"
            );
        }
    }
    println!("{}", summary.join("\n"));
}

/// A tensor of the crafted file: name, type, and the (row, block) of its first bad block.
type Case = (&'static str, GgmlType, Option<(u64, u64)>);

/// A file with one tensor per case: clean ones and bad ones in several types.
fn crafted_file() -> (Vec<u8>, Vec<Case>) {
    let mut w = GgufWriter::new();
    w.kv("general.architecture", "test");
    // (name, type, bytes, expected (row, block) of the first problem)
    let mut cases = Vec::new();
    let mut add = |name: &'static str, t: GgmlType, ne: &[u64], data: Vec<u8>, bad| {
        w.tensor(name, t, ne, data);
        cases.push((name, t, bad));
    };
    // F32 [3 rows of 8]: clean; and a NaN in row 2, column 5.
    let mut f32s: Vec<u8> = (0..24)
        .flat_map(|i| (i as f32 * 0.5).to_le_bytes())
        .collect();
    add("clean.f32", GgmlType::F32, &[8, 3], f32s.clone(), None);
    f32s[4 * (2 * 8 + 5)..][..4].copy_from_slice(&f32::NAN.to_le_bytes());
    add("nan.f32", GgmlType::F32, &[8, 3], f32s, Some((2, 5)));
    // F16: -inf at row 1, column 0.
    let mut f16s = vec![0u8; 2 * 16];
    f16s[2 * 8..][..2].copy_from_slice(&0xfc00u16.to_le_bytes());
    add("inf.f16", GgmlType::F16, &[8, 2], f16s, Some((1, 0)));
    // BF16: NaN at row 0, column 3.
    let mut bf16s = vec![0u8; 2 * 8];
    bf16s[6..8].copy_from_slice(&0x7fc1u16.to_le_bytes());
    add("nan.bf16", GgmlType::BF16, &[8], bf16s, Some((0, 3)));
    // Q8_0 [2 rows of 64]: clean (quantized), and a NaN scale in row 1, block 1.
    let values: Vec<f32> = (0..128).map(|i| (i as f32 - 64.0) / 10.0).collect();
    let mut q8 = vec![0u8; 4 * 34];
    miniquant::quant::quantize(GgmlType::Q8_0, &values, &mut q8).unwrap();
    add("clean.q8_0", GgmlType::Q8_0, &[64, 2], q8.clone(), None);
    q8[3 * 34..][..2].copy_from_slice(&0x7e00u16.to_le_bytes());
    add("nan_d.q8_0", GgmlType::Q8_0, &[64, 2], q8, Some((1, 1)));
    // Q4_1: an infinite `m` in the only row's block 0.
    let mut q4_1 = vec![0u8; 20 * 2];
    q4_1[2..4].copy_from_slice(&0x7c00u16.to_le_bytes());
    add("inf_m.q4_1", GgmlType::Q4_1, &[64], q4_1, Some((0, 0)));
    // Q4_K [2 rows of 256]: clean, and a NaN dmin in row 1.
    let values: Vec<f32> = (0..512)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
        .collect();
    let mut q4k = vec![0u8; 2 * 144];
    miniquant::quant::quantize(GgmlType::Q4_K, &values, &mut q4k).unwrap();
    add("clean.q4_k", GgmlType::Q4_K, &[256, 2], q4k.clone(), None);
    q4k[144 + 2..][..2].copy_from_slice(&0xfe00u16.to_le_bytes());
    add(
        "nan_dmin.q4_k",
        GgmlType::Q4_K,
        &[256, 2],
        q4k,
        Some((1, 0)),
    );
    // Q6_K: `d` is the block's last two bytes.
    let mut q6k = vec![0u8; 210];
    q6k[208..].copy_from_slice(&0x7c00u16.to_le_bytes());
    add("inf_d.q6_k", GgmlType::Q6_K, &[256], q6k, Some((0, 0)));
    // MXFP4: exponent 0xFF in block 2.
    let mut mxfp4 = vec![0u8; 17 * 4];
    mxfp4[2 * 17] = 0xff;
    add("nan_e.mxfp4", GgmlType::MXFP4, &[128], mxfp4, Some((0, 2)));
    // IQ4_NL clean.
    add("clean.iq4_nl", GgmlType::IQ4_NL, &[32], vec![0u8; 18], None);
    (w.to_bytes(), cases)
}

#[test]
fn validate_data_agrees_with_ggml_on_a_file_of_ours() {
    let (bytes, cases) = crafted_file();
    let path = std::env::temp_dir().join(format!(
        "miniquant-validate-data-{}.gguf",
        std::process::id()
    ));
    std::fs::write(&path, &bytes).unwrap();
    let file = GgufFile::open(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    for threads in [1, 3] {
        let problems = check_data(&file, threads);
        for &(name, t, bad) in &cases {
            let data = file.tensor_data(name).unwrap();
            let ggml_accepts = ggml_validate(t, data);
            let ours = problems.iter().find(|p| p.tensor == name);
            assert_eq!(ours.is_none(), ggml_accepts, "{name}: ours {ours:?}");
            assert_eq!(
                bad.is_none(),
                ggml_accepts,
                "{name}: the case is not what it says"
            );
            if let (Some(p), Some((row, block))) = (ours, bad) {
                let DataProblemKind::Invalid {
                    row: r, block: b, ..
                } = &p.kind
                else {
                    panic!("{p:?}")
                };
                assert_eq!((*r, *b), (row, block), "{name}: {p}");
            }
        }
        // Reported in file order.
        let names: Vec<&str> = problems.iter().map(|p| p.tensor.as_str()).collect();
        let expected: Vec<&str> = cases
            .iter()
            .filter(|c| c.2.is_some())
            .map(|c| c.0)
            .collect();
        assert_eq!(names, expected);
    }
}
