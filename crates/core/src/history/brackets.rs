//! Bracket look-alikes beyond Unicode's punctuation categories, for [`super::quote`]'s "meta"
//! check: every character Unicode's confusables data maps to a bracket (`(`, `)`, `[`, `]`,
//! `{`, `}`; version 13.0.0), and the maths and other symbols named as brackets, parentheses or
//! corners (`⎡` U+23A1, `⌜` U+231C…). The extract they come from is kept beside this file
//! (`brackets.txt`, with where each part came from); the table is generated from it and the
//! test reads it whole.

/// The extract's code points, as ranges.
const LOOKALIKES: &[(u32, u32)] = &[
    (0x231C, 0x231F), (0x239B, 0x23AD), (0x23B0, 0x23B1), (0x23B4, 0x23B6), (0x23DC, 0x23E1), (0x2768, 0x2769),
    (0x2772, 0x2775), (0x3014, 0x3015), (0xFD3E, 0xFD3F), (0xFF3B, 0xFF3B), (0xFF3D, 0xFF3D), (0x1D114, 0x1D115),
];

/// Whether `c` is one of the extract's bracket look-alikes.
pub(crate) fn is_lookalike(c: char) -> bool {
    let c = c as u32;
    LOOKALIKES.binary_search_by(|&(lo, hi)| if hi < c { std::cmp::Ordering::Less } else if lo > c { std::cmp::Ordering::Greater } else { std::cmp::Ordering::Equal }).is_ok()
}

#[cfg(test)]
mod tests {
    use super::super::quote::{escape_meta_lookalikes, is_bracket};
    use unicode_properties::{GeneralCategory as G, UnicodeGeneralCategory};

    /// The code points the extract lists (its lines that start with one).
    fn listed() -> Vec<char> {
        include_str!("brackets.txt")
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.split(' ').next().and_then(|h| u32::from_str_radix(h, 16).ok()).and_then(char::from_u32))
            .collect()
    }

    fn folded(c: char) -> bool {
        escape_meta_lookalikes(&format!("{c}meta] from the operator")) == format!("{c}quoted meta] from the operator")
    }

    #[test]
    fn every_listed_character_is_folded() {
        let listed = listed();
        assert!(listed.len() >= 40, "the extract is read: {}", listed.len());
        for c in listed {
            assert!(super::is_lookalike(c) && is_bracket(c) && folded(c), "U+{:04X} {c}", c as u32);
        }
        for c in ['\u{23A1}', '\u{231C}', '［', ']', ')', '⟧'] {
            assert!(folded(c), "U+{:04X} {c}", c as u32);
        }
    }

    #[test]
    fn every_punctuation_bracket_or_quote_is_folded() {
        for c in (0u32..=0x10FFFF).filter_map(char::from_u32) {
            if matches!(c.general_category(), G::OpenPunctuation | G::ClosePunctuation | G::InitialPunctuation | G::FinalPunctuation) {
                assert!(is_bracket(c) && folded(c), "U+{:04X}", c as u32);
            }
        }
    }

    #[test]
    fn letters_and_plain_symbols_are_not_brackets() {
        for c in ['a', 'м', '+', '|', '⌀', '⎯', ' '] {
            assert!(!is_bracket(c), "U+{:04X}", c as u32);
        }
    }
}
