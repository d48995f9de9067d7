//! `--type TYPE`: a ggml type name, case-insensitive. A wrong name is a usage error (exit 2) that
//! lists the valid names, and explains llama.cpp's file-type names (`Q4_K_M`), which users often
//! try: they are llama-quantize recipes mixing several types, not a type.

use miniquant::GgmlType;

/// clap's value parser for `--type`: any ggml type.
pub(super) fn parse(name: &str) -> Result<GgmlType, String> {
    parse_among(name, &GgmlType::ALL, "")
}

/// `--type` of a command that takes only the types `allowed`; a ggml type outside them is refused
/// with `why_not` (which says why the command cannot take it) and the list of those it takes.
pub(super) fn parse_among(
    name: &str,
    allowed: &[GgmlType],
    why_not: &str,
) -> Result<GgmlType, String> {
    let valid: Vec<&str> = allowed.iter().map(|t| t.name()).collect();
    let valid = valid.join(", ");
    if let Some(t) = GgmlType::from_name(name) {
        return if allowed.contains(&t) {
            Ok(t)
        } else {
            Err(format!(
                "{t} cannot be used here: {why_not}. Valid types (case-insensitive): {valid}"
            ))
        };
    }
    // llama.cpp's `LLAMA_FTYPE_MOSTLY_*` names: a base type and a mixture suffix.
    let upper = name.to_ascii_uppercase();
    let recipe = ["_XS", "_S", "_M", "_L"]
        .iter()
        .find_map(|suffix| upper.strip_suffix(suffix))
        .and_then(GgmlType::from_name);
    Err(match recipe {
        Some(base) => format!(
            "{name} is a llama-quantize recipe (a mix of types chosen per tensor), not a ggml \
             type; the nearest type is {base}. Valid types (case-insensitive): {valid}"
        ),
        None => format!("unknown ggml type {name:?}. Valid types (case-insensitive): {valid}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_case_insensitive_and_recipes_are_explained() {
        assert_eq!(parse("q4_k"), Ok(GgmlType::Q4_K));
        assert_eq!(parse("Q4_K"), Ok(GgmlType::Q4_K));
        assert_eq!(parse("iq2_xxs"), Ok(GgmlType::IQ2_XXS));
        let recipe = parse("Q4_K_M").unwrap_err();
        assert!(recipe.contains("llama-quantize recipe"), "{recipe}");
        assert!(recipe.contains("nearest type is Q4_K"), "{recipe}");
        let unknown = parse("foo").unwrap_err();
        assert!(
            unknown.starts_with("unknown ggml type \"foo\""),
            "{unknown}"
        );
        assert!(
            unknown.contains("Q8_0") && unknown.contains("IQ4_XS"),
            "{unknown}"
        );
    }

    #[test]
    fn a_command_taking_some_types_says_why_and_lists_them() {
        let some = [GgmlType::Q8_0, GgmlType::Q4_K];
        assert_eq!(parse_among("q4_k", &some, "x"), Ok(GgmlType::Q4_K));
        assert_eq!(
            parse_among("iq2_xxs", &some, "it needs an importance matrix"),
            Err(
                "IQ2_XXS cannot be used here: it needs an importance matrix. Valid types \
                 (case-insensitive): Q8_0, Q4_K"
                    .into()
            )
        );
        let recipe = parse_among("Q4_K_M", &some, "x").unwrap_err();
        assert!(recipe.contains("nearest type is Q4_K"), "{recipe}");
        assert!(
            recipe.ends_with("Valid types (case-insensitive): Q8_0, Q4_K"),
            "{recipe}"
        );
    }
}
