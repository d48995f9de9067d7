//! The minimal images' work, shared by the M4F and RISC-V ones (`cortex-m4f/src/bin/minimal.rs`,
//! `riscv32/src/bin/minimal.rs`): the `&[u8]` driver and `Catalog` over the embedded extract and,
//! with feature `kernels`, the Q8_0 and Q4_K matvec compared with the host's bits; no logging.
//! With feature `model`, [`run_model`]: the tiny llama's greedy run compared with the host's.

use crate::inputs::{tensor_names, MODEL};
use miniquant::gguf::{Catalog, Limits, SliceParser};

/// Whether the parse succeeded and (with `kernels`) every output matched the host's bits.
pub fn run() -> bool {
    let names = tensor_names();
    let mut found = Catalog::of(&["general.architecture"], &names);
    let mut parser = SliceParser::new(MODEL, Limits::DEFAULT);
    let mut ok = true;
    loop {
        match parser.next_event() {
            Ok(Some(event)) => found.observe(&event, parser.event_offset()),
            Ok(None) => break,
            Err(_) => {
                ok = false;
                break;
            }
        }
    }
    let data = found.data_offset().unwrap_or(0);
    for (i, name) in names.iter().enumerate() {
        ok &= match found.tensor(name) {
            Some(t) => kernels::check(i, t, data),
            None => false,
        };
    }
    ok
}

/// Whether the tiny llama's greedy run from the host's prompt equals the host's, step for step;
/// its working memory is the start of `free` (the board's free RAM).
#[cfg(feature = "model")]
pub fn run_model(free: &mut [f32]) -> bool {
    use crate::inputs::{TINY_LLAMA, TINY_LLAMA_EXPECTED, TINY_LLAMA_MAX_LAYERS};
    use crate::model::{generate, work_words, Expected, Step, MAX_STEPS};
    use miniquant::model::{Layout, Model, SingleThread};

    let Some(expected) = Expected::parse(TINY_LLAMA_EXPECTED) else {
        return false;
    };
    let Ok(model) = Model::<TINY_LLAMA_MAX_LAYERS>::from_gguf(TINY_LLAMA) else {
        return false;
    };
    let (prompt, steps) = (expected.prompt(), expected.steps().len());
    let Ok(layout) = Layout::new(&model, prompt.len() + steps, prompt.len()) else {
        return false;
    };
    let Some(work) = work_words(&model, &layout).and_then(|words| free.get_mut(..words)) else {
        return false;
    };
    let mut got = [Step::default(); MAX_STEPS];
    let Some(got) = got.get_mut(..steps) else {
        return false;
    };
    let mm = SingleThread {
        level: miniquant::quant::level::current(),
    };
    generate(&model, layout, &mm, || 0, prompt, work, got).is_ok() && expected.matches(got)
}

#[cfg(feature = "kernels")]
mod kernels {
    use crate::inputs::{MODEL, X, Y};
    use miniquant::gguf::FoundTensor;
    use miniquant::quant::activation::BlockQ8_0;
    use miniquant::quant::k_quants::BlockQ4K;
    use miniquant::quant::table::Kernels;
    use miniquant::quant::typed;
    use miniquant::GgmlType;

    const MAX: usize = 2048;

    /// Tensor `i`'s matvec equals the host's, bit for bit. This image's budget is the parser and
    /// two kernels: tensors of other types (the full images check them) are not run here.
    pub fn check(i: usize, t: &FoundTensor, data_offset: u64) -> bool {
        match t.ggml_type {
            GgmlType::Q8_0 => check_typed::<BlockQ8_0>(i, t, data_offset),
            GgmlType::Q4_K => check_typed::<BlockQ4K>(i, t, data_offset),
            _ => true,
        }
    }

    fn check_typed<B: Kernels>(i: usize, t: &FoundTensor, data_offset: u64) -> bool {
        let (cols, rows) = (t.ne[0] as usize, t.ne[1] as usize);
        let start = data_offset.saturating_add(t.offset) as usize;
        let Some(w) = MODEL.get(start..start.saturating_add(t.bytes as usize)) else {
            return false;
        };
        let (Some(xb), Some(yb)) = (X.get(i), Y.get(i)) else {
            return false;
        };
        if cols > MAX || rows > MAX {
            return false;
        }
        let mut x = [0f32; MAX];
        for (v, b) in x.iter_mut().zip(xb.chunks_exact(4)) {
            *v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        }
        let mut scratch = [0u8; MAX / 256 * 292];
        let mut y = [0f32; MAX];
        let (Some(x), Some(y)) = (x.get(..cols), y.get_mut(..rows)) else {
            return false;
        };
        let ran = typed::matvec_scratch_bytes::<B>(cols).is_ok_and(|n| {
            scratch
                .get_mut(..n)
                .is_some_and(|s| typed::matvec::<B>(w, rows, cols, x, s, y).is_ok())
        });
        ran && yb.len() == rows * 4
            && y.iter()
                .zip(yb.chunks_exact(4))
                .all(|(v, b)| v.to_bits() == u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}

#[cfg(not(feature = "kernels"))]
mod kernels {
    use miniquant::gguf::FoundTensor;

    /// Without kernels, the tensors need only be found.
    pub fn check(_: usize, _: &FoundTensor, _: u64) -> bool {
        true
    }
}
