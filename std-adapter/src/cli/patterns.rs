//! Names as a user types them on the command line: the shell-style globs every command selects
//! names with ([`glob_match`]) and the "did you mean" of a name that is not there
//! ([`suggestion`]).

/// Shell-style glob: `*` matches any run of characters, `?` one character; everything else
/// itself. Iterative with one backtrack point, so linear-ish and without recursion.
pub(super) fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    // Position of the last `*` seen, and where in `text` it started matching.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(&c) if c == '?' || Some(&c) == t.get(ti) => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p.get(pi..)
        .is_some_and(|rest| rest.iter().all(|&c| c == '*'))
}

/// Whether `pattern` has glob characters (else it names one thing).
pub(super) fn is_glob(pattern: &str) -> bool {
    pattern.contains(['*', '?'])
}

/// Names longer than this are not compared (a file's names are short; a hostile one's need not be).
const MAX_SUGGESTED_CHARS: usize = 256;
/// Edit-distance cells computed for one suggestion at most, whatever the directory's size.
const SUGGESTION_BUDGET: usize = 1 << 22;

/// `; did you mean "NAME"?` for the name among `candidates` nearest to `wanted` (fewest
/// single-character insertions, deletions and substitutions, the first in order on a tie), if one
/// is within a quarter of its length (at least 2 edits); else the empty string.
pub(super) fn suggestion<'a>(
    wanted: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> String {
    let wanted: Vec<char> = wanted.chars().collect();
    if wanted.is_empty() || wanted.len() > MAX_SUGGESTED_CHARS {
        return String::new();
    }
    let max_distance = (wanted.len() / 4).max(2);
    let mut budget = SUGGESTION_BUDGET;
    let mut best: Option<(usize, &str)> = None;
    let mut row = Vec::new();
    let mut candidate = Vec::new();
    for name in candidates {
        candidate.clear();
        candidate.extend(name.chars().take(MAX_SUGGESTED_CHARS + 1));
        let limit = best.map_or(max_distance, |(d, _)| d.saturating_sub(1));
        if candidate.len() > MAX_SUGGESTED_CHARS || candidate.len().abs_diff(wanted.len()) > limit {
            continue;
        }
        let cells = (wanted.len() + 1) * (candidate.len() + 1);
        let Some(left) = budget.checked_sub(cells) else {
            break;
        };
        budget = left;
        if let Some(d) = distance_within(&wanted, &candidate, limit, &mut row) {
            best = Some((d, name));
        }
    }
    match best {
        Some((_, name)) => format!("; did you mean {name:?}?"),
        None => String::new(),
    }
}

/// The Levenshtein distance of `a` and `b` if it is at most `limit` (one row of the table).
fn distance_within(a: &[char], b: &[char], limit: usize, row: &mut Vec<usize>) -> Option<usize> {
    row.clear();
    row.extend(0..=b.len());
    for (i, &ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        let mut row_min = row[0];
        for (j, &cb) in b.iter().enumerate() {
            let substitute = diagonal + usize::from(ca != cb);
            diagonal = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(diagonal + 1);
            row_min = row_min.min(row[j + 1]);
        }
        if row_min > limit {
            return None;
        }
    }
    row.last().copied().filter(|&d| d <= limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_like_a_shell() {
        assert!(glob_match("blk.*.attn_q.weight", "blk.12.attn_q.weight"));
        assert!(glob_match("*", ""));
        assert!(glob_match("blk.?.ffn_*", "blk.3.ffn_up.weight"));
        assert!(!glob_match("blk.?.ffn_*", "blk.13.ffn_up.weight"));
        assert!(glob_match("*weight", "output.weight"));
        assert!(!glob_match("*weight", "output.bias"));
        assert!(glob_match("a*b*c", "aXbYbZc"));
        assert!(!glob_match("a*b*c", "aXbYbZ"));
        assert!(glob_match("**x", "yyx"));
        assert!(!glob_match("", "x"));
        assert!(glob_match("token_embd.weight", "token_embd.weight"));
        assert!(!glob_match("token_embd", "token_embd.weight"));
        assert!(glob_match("tokenizer.ggml.*", "tokenizer.ggml.tokens"));
    }

    #[test]
    fn the_nearest_name_is_suggested_within_a_quarter_of_its_length() {
        let names = [
            "token_embd.weight",
            "blk.0.attn_q.weight",
            "blk.0.attn_k.weight",
            "output.weight",
        ];
        assert_eq!(
            suggestion("blk.0.attn_q.weigth", names),
            "; did you mean \"blk.0.attn_q.weight\"?"
        );
        assert_eq!(
            suggestion("blk.0.attn_v.weight", names),
            "; did you mean \"blk.0.attn_q.weight\"?"
        );
        assert_eq!(suggestion("token_embd", names), "");
        assert_eq!(suggestion("zzz", names), "");
        assert_eq!(suggestion("", names), "");
        assert_eq!(
            suggestion("outptu.weight", names),
            "; did you mean \"output.weight\"?"
        );
    }

    #[test]
    fn suggestions_cost_is_bounded_for_hostile_directories() {
        // Many long names of the wanted length: the budget stops the search before the near
        // name at the end, which is found when fewer come before it.
        let wanted = "x".repeat(250);
        let near = format!("{}y", "x".repeat(249));
        let far: Vec<String> = (0..100_000).map(|i| format!("{i:0>250}")).collect();
        let names = |n: usize| {
            far.iter()
                .take(n)
                .map(String::as_str)
                .chain([near.as_str()])
        };
        assert_eq!(
            suggestion(&wanted, names(10)),
            format!("; did you mean {near:?}?")
        );
        assert_eq!(suggestion(&wanted, names(far.len())), "");
        let huge = "y".repeat(1 << 20);
        assert_eq!(suggestion(&huge, ["y"]), "");
        assert_eq!(suggestion("y", [huge.as_str()]), "");
    }
}
