//! The chain of symbols both merge algorithms work on: a text's characters, each a byte range
//! linked to its neighbours, merged pairwise in place.

/// A symbol: a byte range of the text (empty once merged into its left neighbour).
#[derive(Clone, Copy)]
pub(super) struct Symbol {
    pub start: usize,
    pub len: usize,
    pub prev: Option<usize>,
    pub next: Option<usize>,
}

/// The symbols of `text`: one per character, in order.
pub(super) fn chars_of(text: &str) -> Vec<Symbol> {
    let mut symbols: Vec<Symbol> = Vec::with_capacity(text.len());
    for (i, (start, c)) in text.char_indices().enumerate() {
        symbols.push(Symbol {
            start,
            len: c.len_utf8(),
            prev: i.checked_sub(1),
            next: None,
        });
        if let Some(prev) = i.checked_sub(1).and_then(|p| symbols.get_mut(p)) {
            prev.next = Some(i);
        }
    }
    symbols
}

/// The text of `symbol`.
pub(super) fn text_of<'t>(text: &'t str, symbol: &Symbol) -> &'t str {
    text.get(symbol.start..symbol.start + symbol.len)
        .unwrap_or_default()
}

/// Merges symbol `right` into its left neighbour `left`.
pub(super) fn merge(symbols: &mut [Symbol], left: usize, right: usize) {
    let r = symbols[right];
    symbols[left].len += r.len;
    symbols[left].next = r.next;
    symbols[right].len = 0;
    if let Some(n) = r.next {
        symbols[n].prev = Some(left);
    }
}
