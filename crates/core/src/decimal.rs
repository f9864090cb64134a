//! Decimal numbers typed by people or sent in headers (`1.5`, `30`, `.5`, `2e3`), read as
//! `str::parse::<f64>` reads them, but computed by serde_json's float parser, which the worker
//! carries anyway: core's own (`dec2flt`) brings a 10 KB table of powers of five that gzip cannot
//! shrink (issue 40, docs/research/wasm-size.md). The syntax is Rust's: an optional sign, digits
//! with an optional point (at least one digit), an optional exponent; `inf`, `infinity` and
//! `nan` in any case. The value is the same as Rust's for the numbers met here (prices, seconds,
//! minutes: up to 15 significant digits and exponents up to 22, where both are exact); beyond
//! that it may differ in the last bit (serde_json's parser is not always correctly rounded). The
//! tests compare with `str::parse` over many forms.

/// `s` as `s.parse::<f64>().ok()` reads it.
pub fn parse_f64(s: &str) -> Option<f64> {
    let (negative, body) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let signed = |v: f64| if negative { -v } else { v };
    let lower = body.to_ascii_lowercase();
    if lower == "inf" || lower == "infinity" {
        return Some(signed(f64::INFINITY));
    }
    if lower == "nan" {
        return Some(f64::NAN);
    }
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    if !digits(int) || !digits(frac) || int.len() + frac.len() == 0 {
        return None;
    }
    let mut json = String::with_capacity(body.len() + 3);
    if negative {
        json.push('-');
    }
    let int = int.trim_start_matches('0');
    json.push_str(if int.is_empty() { "0" } else { int });
    if !frac.is_empty() {
        json.push('.');
        json.push_str(frac);
    }
    if let Some(e) = exponent {
        let e_digits = e.strip_prefix(['+', '-']).unwrap_or(e);
        if e_digits.is_empty() || !digits(e_digits) {
            return None;
        }
        json.push('e');
        // A huge exponent saturates, as Rust's parser does.
        let trimmed = e_digits.trim_start_matches('0');
        if trimmed.len() > 5 {
            let big_negative = e.starts_with('-');
            let zero = int.is_empty() && frac.bytes().all(|b| b == b'0');
            return Some(signed(if big_negative || zero { 0.0 } else { f64::INFINITY }));
        }
        json.push_str(&e[..e.len() - e_digits.len()]);
        json.push_str(if trimmed.is_empty() { "0" } else { trimmed });
    }
    match serde_json::from_str::<f64>(&json) {
        Ok(v) => Some(v),
        // serde_json refuses what overflows; Rust's parser says infinity.
        Err(_) => Some(signed(f64::INFINITY)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn same(s: &str) {
        let ours = parse_f64(s);
        let rust = s.parse::<f64>().ok();
        match (ours, rust) {
            (Some(a), Some(b)) if a.is_nan() => assert!(b.is_nan(), "{s:?}"),
            (Some(a), Some(b)) => assert!(a == b || (a - b).abs() <= b.abs() * f64::EPSILON, "{s:?}: {a} vs {b}"),
            (a, b) => assert_eq!(a.is_some(), b.is_some(), "{s:?}: {a:?} vs {b:?}"),
        }
    }

    #[test]
    fn reads_as_rust_reads() {
        for s in [
            "0", "1", "30", "1.5", "-1.5", "+2", ".5", "5.", "-.5", "00012.50", "0.1", "0.25", "12.5", "2e3", "2E+3", "1e-3",
            "1.5e2", "1e400", "-1e400", "1e-400", "0e999999999", "1e0000000000002", "inf", "-Infinity", "NaN", "", "-", "+",
            ".", "e5", "1e", "1e+", "1.2.3", "1,5", " 1", "1 ", "0x10", "1_000", "١", "12345678901234567890", "0.000001",
            "3.14159", "-0", "1e-5", "99.99", "1/2",
        ] {
            same(s);
        }
    }

    proptest! {
        #[test]
        fn short_decimals_read_as_rust_reads(s in "[+-]?[0-9]{0,7}(\\.[0-9]{0,6})?([eE][+-]?[0-9]{1,2})?") {
            same(&s);
        }

        #[test]
        fn plain_decimals_read_exactly_as_rust_reads(s in "[+-]?[0-9]{0,7}(\\.[0-9]{0,7})?([eE][+-]?[0-9])?") {
            let (ours, rust) = (parse_f64(&s), s.parse::<f64>().ok());
            prop_assert_eq!(ours.map(f64::to_bits), rust.map(f64::to_bits), "{:?}", s);
        }

        #[test]
        fn any_short_text_is_refused_or_read_as_rust_reads(s in "[0-9eE.+\\-a-z ]{0,8}") {
            same(&s);
        }
    }
}
