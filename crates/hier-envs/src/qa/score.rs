//! Answer scoring exactly as ASearcher scores it (METHODS.md B.1).
//!
//! - **F1** over *sets* of tokens: both strings go through `bool_mapping` (`"True"` → `yes`,
//!   `"False"` → `no`), every ASCII punctuation character becomes a space, whitespace runs
//!   collapse, the ends are trimmed and the text lowercased (articles stay); precision and
//!   recall count distinct shared tokens. An empty prediction or an empty gold answer scores 0.
//! - **EM** with SQuAD's normalisation: lowercase, punctuation *removed*, the articles
//!   `a|an|the` dropped as whole words, whitespace collapsed (after the same `bool_mapping`).
//! - Several gold answers: the maximum. A missing answer (no `<answer>` tag) scores 0.

use std::collections::BTreeSet;

/// `True`/`False` as `yes`/`no`, as ASearcher's `bool_mapping` (exact, case-sensitive).
fn bool_mapping(s: &str) -> &str {
    match s {
        "True" => "yes",
        "False" => "no",
        other => other,
    }
}

/// ASearcher's `normalize_text` (the F1 normalisation).
pub fn normalize_f1(text: &str) -> String {
    let spaced: String = bool_mapping(text)
        .chars()
        .map(|c| if c.is_ascii_punctuation() { ' ' } else { c })
        .collect();
    spaced
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// SQuAD's `normalize_answer` (the EM normalisation): lowercase, remove ASCII punctuation,
/// replace `\b(a|an|the)\b` by a space (Unicode word boundaries, as Python's `re`), collapse
/// whitespace.
pub fn normalize_em(text: &str) -> String {
    static ARTICLES: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let articles = ARTICLES.get_or_init(|| regex::Regex::new(r"\b(a|an|the)\b").expect("valid"));
    let lower = bool_mapping(text).to_lowercase();
    let no_punct: String = lower
        .chars()
        .filter(|c| !c.is_ascii_punctuation())
        .collect();
    articles
        .replace_all(&no_punct, " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Set-token F1 of one prediction against one gold answer.
pub fn f1(prediction: &str, gold: &str) -> f64 {
    let p = normalize_f1(prediction);
    let g = normalize_f1(gold);
    let p: BTreeSet<&str> = p.split_whitespace().collect();
    let g: BTreeSet<&str> = g.split_whitespace().collect();
    if p.is_empty() || g.is_empty() {
        return 0.0;
    }
    let common = p.intersection(&g).count() as f64;
    let (precision, recall) = (common / p.len() as f64, common / g.len() as f64);
    if precision + recall > 0.0 {
        2.0 * precision * recall / (precision + recall)
    } else {
        0.0
    }
}

/// Exact match (1 or 0) of one prediction against one gold answer.
pub fn exact_match(prediction: &str, gold: &str) -> f64 {
    f64::from(u8::from(normalize_em(prediction) == normalize_em(gold)))
}

/// F1 and EM of an answer (`None`: the agent never answered) against every gold answer: the
/// best of each.
pub fn score(prediction: Option<&str>, golds: &[String]) -> (f64, f64) {
    let Some(p) = prediction else {
        return (0.0, 0.0);
    };
    golds.iter().fold((0.0, 0.0), |(f, e), g| {
        (f.max(f1(p, g)), e.max(exact_match(p, g)))
    })
}

/// The last `<answer> … </answer>` of a text, trimmed (ASearcher's `extract_solution`).
pub fn extract_answer(text: &str) -> Option<String> {
    let mut found = None;
    let mut rest = text;
    while let Some(start) = rest.find("<answer>") {
        let after = &rest[start + "<answer>".len()..];
        match after.find("</answer>") {
            Some(end) => {
                found = Some(after[..end].trim().to_owned());
                rest = &after[end + "</answer>".len()..];
            }
            None => break,
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f1_is_over_token_sets_with_punctuation_as_space() {
        // Hand-computed: pred {the, eiffel, tower}, gold {eiffel, tower}: p = 2/3, r = 1.
        assert!((f1("The Eiffel-Tower!", "eiffel tower") - 0.8).abs() < 1e-12);
        // Sets: repeated tokens count once. pred {paris}, gold {paris, france}: p 1, r 1/2.
        assert!((f1("Paris Paris", "Paris, France") - 2.0 / 3.0).abs() < 1e-12);
        // Articles stay in F1 (no article removal): {a, cat} vs {cat}: p 1/2, r 1.
        assert!((f1("a cat", "cat") - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(f1("", "x"), 0.0);
        assert_eq!(f1("...", "x"), 0.0);
        assert_eq!(f1("True", "yes"), 1.0);
        assert_eq!(f1("true", "yes"), 0.0, "bool_mapping is exact");
        assert_eq!(normalize_f1("  U.S.A.  Inc "), "u s a inc");
    }

    #[test]
    fn em_uses_squad_normalisation_and_the_best_gold_counts() {
        assert_eq!(exact_match("The  Eiffel Tower.", "eiffel tower"), 1.0);
        assert_eq!(
            exact_match("U.S.A.", "usa"),
            1.0,
            "punctuation is removed, not spaced"
        );
        assert_eq!(exact_match("an apple", "apple"), 1.0);
        assert_eq!(
            exact_match("theater", "ater"),
            0.0,
            "articles only as whole words"
        );
        assert_eq!(normalize_em("False"), "no");
        // A boundary is any non-word character, not only a space (Python's `\b`).
        assert_eq!(normalize_em("the—cat"), "—cat");
        let golds = vec!["Paris".to_owned(), "Paris, France".to_owned()];
        assert_eq!(score(Some("paris france"), &golds), (1.0, 1.0));
        assert_eq!(score(None, &golds), (0.0, 0.0));
        let (f, e) = score(Some("in Paris"), &golds);
        assert!((f - 2.0 / 3.0).abs() < 1e-12 && e == 0.0);
    }

    #[test]
    fn the_last_answer_tag_counts() {
        assert_eq!(
            extract_answer("<think>x</think><answer> A </answer> then <answer>B</answer>"),
            Some("B".into())
        );
        assert_eq!(extract_answer("<answer>unclosed"), None);
        assert_eq!(extract_answer("no tags"), None);
    }
}
