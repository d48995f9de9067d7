//! `miniquant bench`'s measurements and table, taken and laid out as llama.cpp's `llama-bench`
//! takes and prints them, so that the two tables can be read side by side.
//!
//! - The model is described as llama.cpp describes it ([`ModelSummary`]): architecture, size
//!   class from the layer count (`llama 256M`, `?B` when llama.cpp's table has no entry), file type
//!   (`Q4_1`, or the most common tensor type, `(guessed)`), the tensors' bytes and elements.
//! - A prompt test `ppN` runs N token ids through an empty context in batches; a generation test
//!   `tgN` runs N tokens one at a time from an empty context. The first id is BOS when the file
//!   adds one, the others come from a fixed-seed generator (llama-bench draws them with C's
//!   `rand()`: the values do not change what a forward pass computes, only which rows of the
//!   embedding it reads).
//! - Each test runs once untimed (llama-bench's warm-up: the whole prompt, or one generated
//!   token), then `repetitions` times from an empty context, timed; a row shows the mean and the
//!   sample standard deviation of the tokens per second of those runs.

use std::time::{Duration, Instant};

use miniquant::model::{MatMul, ModelError, Session};
use miniquant::GgmlType;

use crate::value::Value;
use crate::{GgufFile, Tokenizer};

/// What llama-bench's `model`, `size` and `params` columns show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSummary {
    /// `llama 256M Q4_1`: architecture, size class, file type.
    pub description: String,
    /// Bytes of all tensors.
    pub bytes: u64,
    /// Elements of all tensors.
    pub params: u64,
}

impl ModelSummary {
    /// The summary of `file`, from its metadata and tensor directory.
    pub fn of(file: &GgufFile) -> Self {
        let index = file.index();
        let arch = index
            .get("general.architecture")
            .and_then(Value::as_str)
            .unwrap_or("unknown");
        let uint = |key: &str| index.get(key).and_then(Value::as_u64);
        let layers = uint(&format!("{arch}.block_count")).unwrap_or(0);
        let vocab = uint(&format!("{arch}.vocab_size")).or_else(|| {
            let tokens = index.get("tokenizer.ggml.tokens")?.as_array()?;
            Some(tokens.len() as u64)
        });
        let heads = uint(&format!("{arch}.attention.head_count"));
        let kv_heads = uint(&format!("{arch}.attention.head_count_kv")).or(heads);
        let size_class = size_class(arch, layers, vocab, heads == kv_heads);
        let file_type = match uint("general.file_type") {
            Some(t) => file_type_name(t).to_owned(),
            None => format!("(guessed) {}", guessed_file_type(file)),
        };
        let tensors = index.tensors();
        Self {
            description: format!("{arch} {size_class} {file_type}"),
            bytes: tensors.iter().map(|t| t.bytes).sum(),
            params: tensors.iter().map(|t| t.elements).sum(),
        }
    }
}

/// llama.cpp's size class of a model: its table by layer count for the architectures we run
/// (`LLM_TYPE_*`), `?B` (its name for an unknown one) otherwise.
fn size_class(arch: &str, layers: u64, vocab: Option<u64>, same_heads: bool) -> &'static str {
    match (arch, layers) {
        ("llama", 16 | 22) => "1B",
        ("llama", 26 | 28) => "3B",
        ("llama", 30) => "256M",
        ("llama", 32) => match vocab {
            Some(49152) => "3B",
            Some(v) if v < 40000 => "7B",
            _ => "8B",
        },
        ("llama", 36) => "8B",
        ("llama", 40) => "13B",
        ("llama", 48) => "34B",
        ("llama", 60) => "30B",
        ("llama", 80) if same_heads => "65B",
        ("llama", 80) => "70B",
        ("gemma3", 18) => "270M",
        ("gemma3", 26) => "1B",
        ("gemma3", 32) => "8B",
        ("gemma3", 34) => "4B",
        ("gemma3", 48) => "12B",
        ("gemma3", 62) => "27B",
        _ => "?B",
    }
}

/// llama.cpp's name of a `general.file_type` (`llama_ftype_name`).
fn file_type_name(file_type: u64) -> &'static str {
    match file_type {
        0 => "all F32",
        1 => "F16",
        2 => "Q4_0",
        3 => "Q4_1",
        7 => "Q8_0",
        8 => "Q5_0",
        9 => "Q5_1",
        10 => "Q2_K - Medium",
        11 => "Q3_K - Small",
        12 => "Q3_K - Medium",
        13 => "Q3_K - Large",
        14 => "Q4_K - Small",
        15 => "Q4_K - Medium",
        16 => "Q5_K - Small",
        17 => "Q5_K - Medium",
        18 => "Q6_K",
        19 => "IQ2_XXS - 2.0625 bpw",
        20 => "IQ2_XS - 2.3125 bpw",
        21 => "Q2_K - Small",
        22 => "IQ3_XS - 3.3 bpw",
        23 => "IQ3_XXS - 3.0625 bpw",
        24 => "IQ1_S - 1.5625 bpw",
        25 => "IQ4_NL - 4.5 bpw",
        26 => "IQ3_S - 3.4375 bpw",
        27 => "IQ3_S mix - 3.66 bpw",
        28 => "IQ2_S - 2.5 bpw",
        29 => "IQ2_M - 2.7 bpw",
        30 => "IQ4_XS - 4.25 bpw",
        31 => "IQ1_M - 1.75 bpw",
        32 => "BF16",
        36 => "TQ1_0 - 1.69 bpw ternary",
        37 => "TQ2_0 - 2.06 bpw ternary",
        _ => "unknown, may not work",
    }
}

/// The file type llama.cpp guesses for a file without `general.file_type`: that of the most
/// common tensor type (the first to reach the highest count, in directory order).
fn guessed_file_type(file: &GgufFile) -> &'static str {
    let mut counts: Vec<(GgmlType, u32)> = Vec::new();
    let mut best = (GgmlType::F32, 0u32);
    for t in file.index().tensors() {
        let count = match counts.iter_mut().find(|(ty, _)| *ty == t.ggml_type) {
            Some((_, n)) => {
                *n += 1;
                *n
            }
            None => {
                counts.push((t.ggml_type, 1));
                1
            }
        };
        if count > best.1 {
            best = (t.ggml_type, count);
        }
    }
    match best.0 {
        GgmlType::F32 => "all F32",
        GgmlType::F16 => "F16",
        GgmlType::BF16 => "BF16",
        GgmlType::Q4_0 => "Q4_0",
        GgmlType::Q4_1 => "Q4_1",
        GgmlType::Q5_0 => "Q5_0",
        GgmlType::Q5_1 => "Q5_1",
        GgmlType::Q8_0 => "Q8_0",
        GgmlType::Q2_K => "Q2_K - Medium",
        GgmlType::Q3_K => "Q3_K - Medium",
        GgmlType::Q4_K => "Q4_K - Medium",
        GgmlType::Q5_K => "Q5_K - Medium",
        GgmlType::Q6_K => "Q6_K",
        GgmlType::IQ4_NL => "IQ4_NL - 4.5 bpw",
        GgmlType::IQ4_XS => "IQ4_XS - 4.25 bpw",
        _ => "all F32",
    }
}

/// One test of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Test {
    /// `ppN`: N prompt tokens, in batches.
    Prompt(usize),
    /// `tgN`: N tokens generated one at a time.
    Generate(usize),
}

impl Test {
    /// llama-bench's name of the test: `pp512`, `tg128`.
    pub fn name(self) -> String {
        match self {
            Self::Prompt(n) => format!("pp{n}"),
            Self::Generate(n) => format!("tg{n}"),
        }
    }

    /// Tokens the test runs.
    pub fn tokens(self) -> usize {
        match self {
            Self::Prompt(n) | Self::Generate(n) => n,
        }
    }
}

/// A small fixed-seed generator of token ids (xorshift64*): the same ids on every run.
#[derive(Debug, Clone)]
pub struct TokenIds {
    state: u64,
    vocab: u32,
    bos: Option<u32>,
}

impl TokenIds {
    /// Ids below `vocab` (at least 1); a sequence starts with `bos` if given.
    pub fn new(vocab: usize, bos: Option<u32>) -> Self {
        Self {
            state: 0x9E37_79B9_7F4A_7C15,
            vocab: u32::try_from(vocab.max(1)).unwrap_or(u32::MAX),
            bos: bos.filter(|&b| (b as usize) < vocab),
        }
    }

    fn next_id(&mut self) -> u32 {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        let r = self.state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32;
        (r % u64::from(self.vocab)) as u32
    }

    /// The first id of a sequence: BOS, else a random one.
    fn first(&mut self) -> u32 {
        match self.bos {
            Some(b) => b,
            None => self.next_id(),
        }
    }

    /// A sequence of `n` ids as a prompt test runs it.
    pub fn prompt(&mut self, n: usize) -> Vec<u32> {
        let mut ids = Vec::with_capacity(n);
        if n > 0 {
            ids.push(self.first());
        }
        while ids.len() < n {
            ids.push(self.next_id());
        }
        ids
    }
}

/// The id llama-bench starts sequences with for the file: its BOS if its tokenizer adds one.
pub fn bos_of(file: &GgufFile) -> Option<u32> {
    let tokenizer = Tokenizer::from_gguf(file).ok()?;
    if tokenizer.adds_bos() {
        tokenizer.bos()
    } else {
        None
    }
}

/// Runs `test` once from an empty context and returns how long it took.
pub fn run_once<const L: usize>(
    session: &mut Session<'_, '_, '_, L>,
    mm: &impl MatMul,
    test: Test,
    ids: &mut TokenIds,
    logits: &mut [f32],
) -> Result<Duration, ModelError> {
    session.reset();
    match test {
        Test::Prompt(n) => {
            // Drawn before the clock starts, as llama-bench's are drawn per batch in no time.
            let prompt = ids.prompt(n);
            let start = Instant::now();
            session.forward(mm, &prompt, logits)?;
            Ok(start.elapsed())
        }
        Test::Generate(n) => {
            let start = Instant::now();
            let mut token = ids.first();
            for _ in 0..n {
                session.forward(mm, &[token], logits)?;
                token = ids.next_id();
            }
            Ok(start.elapsed())
        }
    }
}

/// Tokens per second of each timed run of a test of `tokens` tokens.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rates(pub Vec<f64>);

impl Rates {
    /// Adds a run of `tokens` tokens that took `time`.
    pub fn push(&mut self, tokens: usize, time: Duration) {
        self.0.push(tokens as f64 / time.as_secs_f64().max(1e-9));
    }

    /// The mean (0 without runs).
    pub fn mean(&self) -> f64 {
        if self.0.is_empty() {
            return 0.0;
        }
        self.0.iter().sum::<f64>() / self.0.len() as f64
    }

    /// The sample standard deviation as llama-bench computes it (0 for fewer than 2 runs).
    pub fn stddev(&self) -> f64 {
        let n = self.0.len() as f64;
        if self.0.len() < 2 {
            return 0.0;
        }
        let mean = self.mean();
        let squares: f64 = self.0.iter().map(|v| v * v).sum();
        (squares / (n - 1.0) - mean * mean * n / (n - 1.0))
            .max(0.0)
            .sqrt()
    }
}

/// The table's columns: name and width (negative: left-aligned), as llama-bench's CPU table.
const COLUMNS: [(&str, isize); 7] = [
    ("model", -30),
    ("size", 10),
    ("params", 10),
    ("backend", -10),
    ("threads", 7),
    ("test", 15),
    ("t/s", 20),
];

fn cell(text: &str, width: isize) -> String {
    let w = width.unsigned_abs();
    if width < 0 {
        format!(" {text:<w$} |")
    } else {
        format!(" {text:>w$} |")
    }
}

/// The header and the rule under it, two lines.
pub fn table_header() -> String {
    let mut names = String::from("|");
    let mut rule = String::from("|");
    for (name, width) in COLUMNS {
        names.push_str(&cell(name, width));
        let dashes = "-".repeat(width.unsigned_abs() - 1);
        rule.push_str(&format!(" {dashes}{} |", if width > 0 { ':' } else { '-' }));
    }
    format!("{names}\n{rule}\n")
}

/// One row: the model, `threads`, the test and its rates.
pub fn table_row(model: &ModelSummary, threads: usize, test: Test, rates: &Rates) -> String {
    let size = model.bytes as f64;
    let size = if model.bytes < 1 << 30 {
        format!("{:.2} MiB", size / 1024.0 / 1024.0)
    } else {
        format!("{:.2} GiB", size / 1024.0 / 1024.0 / 1024.0)
    };
    let params = model.params as f64;
    let params = if model.params < 1_000_000_000 {
        format!("{:.2} M", params / 1e6)
    } else {
        format!("{:.2} B", params / 1e9)
    };
    let values = [
        model.description.clone(),
        size,
        params,
        "CPU".to_owned(),
        threads.to_string(),
        test.name(),
        format!("{:.2} ± {:.2}", rates.mean(), rates.stddev()),
    ];
    let mut row = String::from("|");
    for (value, (_, width)) in values.iter().zip(COLUMNS) {
        row.push_str(&cell(value, width));
    }
    row.push('\n');
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_stddev_are_llama_bench_s() {
        let rates = Rates(vec![10.0, 12.0, 14.0]);
        assert_eq!(rates.mean(), 12.0);
        assert!((rates.stddev() - 2.0).abs() < 1e-12);
        assert_eq!(Rates(vec![7.0]).stddev(), 0.0);
        assert_eq!(Rates::default().mean(), 0.0);
    }

    #[test]
    fn rows_line_up_under_the_header_as_llama_bench_s() {
        let header = table_header();
        // llama-bench's header (llama-bench -p 32 -n 8 on SmolLM2-135M).
        assert_eq!(
            header,
            "| model                          |       size |     params | backend    | threads \
             |            test |                  t/s |\n\
             | ------------------------------ | ---------: | ---------: | ---------- | ------: \
             | --------------: | -------------------: |\n"
        );
        let model = ModelSummary {
            description: "llama 256M Q4_1".into(),
            bytes: 96_573_440,
            params: 134_515_008,
        };
        let row = table_row(&model, 2, Test::Prompt(32), &Rates(vec![20.72]));
        assert_eq!(
            row,
            "| llama 256M Q4_1                |  92.10 MiB |   134.52 M | CPU        |       2 \
             |            pp32 |         20.72 ± 0.00 |\n"
        );
        // Same display width as the header (± is one column, two bytes).
        let first = header.lines().next().unwrap();
        assert_eq!(row.trim_end().chars().count(), first.chars().count());
    }

    #[test]
    fn ids_are_below_the_vocabulary_and_start_with_bos() {
        let mut ids = TokenIds::new(100, Some(1));
        let prompt = ids.prompt(1000);
        assert_eq!(prompt[0], 1);
        assert!(prompt.iter().all(|&t| t < 100));
        // Not one repeated value.
        assert!(prompt.iter().any(|&t| t != prompt[1]));
        assert_eq!(TokenIds::new(100, Some(1)).prompt(1000), prompt);
        // A BOS outside the vocabulary is not used.
        assert!(TokenIds::new(10, Some(50))
            .prompt(5)
            .iter()
            .all(|&t| t < 10));
    }
}
