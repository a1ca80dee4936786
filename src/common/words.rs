//! Words as compared across decodes, captions and reference transcripts: lowercase
//! letters, digits and apostrophes. A leaf: ASR's output guards, streaming's agreement,
//! caption revisions and the bench's word error rate all use it, and none of them may
//! import another for it.

/// Word text for comparing hypotheses: case and punctuation vary between decodes of
/// the same speech ("Yeah," then "yeah.") and must not block agreement.
pub fn normalise_word(w: &str) -> String {
    w.chars()
        .filter(|c| c.is_alphanumeric() || *c == '\'')
        .flat_map(char::to_lowercase)
        .collect()
}

/// Lowercase words of letters, digits and apostrophes (WER, caption revisions).
pub fn normalise_words(s: &str) -> Vec<String> {
    s.split_whitespace()
        .map(normalise_word)
        .filter(|w| !w.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_and_punctuation_do_not_count() {
        assert_eq!(normalise_word("Yeah,"), "yeah");
        assert_eq!(
            normalise_words("Oh, great. It's -- fine!"),
            ["oh", "great", "it's", "fine"]
        );
    }
}
