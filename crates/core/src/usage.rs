//! Model usage and what it costs: the totals read from `model_calls`, priced with the price
//! table (`core::gemini::prices`, through `Config::price_at`) at the time the calls were made, and the
//! `/usage` text.
//!
//! Invariant: thinking tokens are billed as output, cached input tokens at the cached price,
//! search queries per query; a row is priced at its own day's price (a promotion that ended
//! since does not reprice it); a model the price table does not know has no cost (shown
//! without one), never a guessed one.

use crate::config::Config;
use serde::Deserialize;

/// Token totals of one model (in one chat and day, when the query groups by them).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct ModelUsage {
    pub model: String,
    pub calls: i64,
    pub prompt_tokens: i64,
    pub candidates_tokens: i64,
    pub thoughts_tokens: i64,
    pub cached_tokens: i64,
    /// Google Search queries the model ran (`WEB_SEARCH`), billed per query.
    #[serde(default)]
    pub search_queries: i64,
    /// Image output tokens (part of `candidates_tokens`), billed at the model's image output
    /// price (`prices::ImagePrice`) when it has one.
    #[serde(default)]
    pub image_tokens: i64,
    /// The UTC day (`YYYY-MM-DD`) the calls were made, when the query groups by day, or the
    /// first call's day of a stretch with one price (`prices::boundaries`): they are priced at
    /// that day's price. Empty: priced at the time asked.
    #[serde(default)]
    pub day: String,
}

/// When a row's calls were made, for its price: the end of its day (the day's last
/// millisecond, so a day is priced as it ended), or `now_ms` when the row has no day.
fn priced_at(r: &ModelUsage, now_ms: i64) -> i64 {
    chrono::NaiveDate::parse_from_str(&r.day, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.succ_opt())
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc().timestamp_millis() - 1)
        .map_or(now_ms, |end| end.min(now_ms))
}

/// Cost in USD of a usage row, if the price table knows its model at the row's time. Input
/// tokens served from Gemini's cache (part of the prompt tokens) are billed at the cached
/// price.
pub fn cost(cfg: &Config, r: &ModelUsage, now_ms: i64) -> Option<f64> {
    let p = cfg.price_at(&r.model, priced_at(r, now_ms))?;
    let cached = r.cached_tokens.clamp(0, r.prompt_tokens.max(0));
    let fresh = r.prompt_tokens - cached;
    let image = r.image_tokens.clamp(0, r.candidates_tokens.max(0));
    let image_price = p.image_output.map_or(p.output, |i| i.per_million_tokens);
    let output = (r.candidates_tokens - image + r.thoughts_tokens) as f64 * p.output + image as f64 * image_price;
    let tokens = (fresh as f64 * p.input + cached as f64 * p.cached_input + output) / 1e6;
    Some(tokens + r.search_queries.max(0) as f64 * cfg.search_price(p) / 1000.0)
}

/// Rows of the same model (several days of it) as one, in the order models first appear.
pub fn by_model(rows: &[ModelUsage]) -> Vec<ModelUsage> {
    let mut out: Vec<ModelUsage> = Vec::new();
    for r in rows {
        match out.iter_mut().find(|o| o.model == r.model) {
            Some(o) => {
                o.calls += r.calls;
                o.prompt_tokens += r.prompt_tokens;
                o.candidates_tokens += r.candidates_tokens;
                o.thoughts_tokens += r.thoughts_tokens;
                o.cached_tokens += r.cached_tokens;
                o.search_queries += r.search_queries;
                o.image_tokens += r.image_tokens;
            }
            None => out.push(ModelUsage { day: String::new(), ..r.clone() }),
        }
    }
    out
}

/// The share of input tokens served from Gemini's cache (0 to 1), when there was input.
pub fn cached_share(r: &ModelUsage) -> Option<f64> {
    (r.prompt_tokens > 0).then(|| r.cached_tokens.clamp(0, r.prompt_tokens) as f64 / r.prompt_tokens as f64)
}

/// The cached share of input tokens over several rows.
pub fn total_cached_share(rows: &[ModelUsage]) -> Option<f64> {
    let total = ModelUsage {
        prompt_tokens: rows.iter().map(|r| r.prompt_tokens).sum(),
        cached_tokens: rows.iter().map(|r| r.cached_tokens.clamp(0, r.prompt_tokens.max(0))).sum(),
        ..Default::default()
    };
    cached_share(&total)
}

/// `/usage`'s lines about a chat's model calls (one per model; `rows` may hold a model's days
/// apart, each priced at its day's price) and their estimated cost.
pub fn chat_totals_text(cfg: &Config, rows: &[ModelUsage], now_ms: i64) -> String {
    if rows.is_empty() {
        return "No model calls in this chat yet.".to_string();
    }
    let mut out = String::from("Model usage in this chat:");
    let mut total = 0.0;
    for r in by_model(rows) {
        out.push_str(&format!(
            "\n{}: {} calls, {} input + {} output tokens ({} thinking, {} cached: {:.0}% of input)",
            r.model,
            r.calls,
            r.prompt_tokens,
            r.candidates_tokens + r.thoughts_tokens,
            r.thoughts_tokens,
            r.cached_tokens,
            cached_share(&r).unwrap_or(0.0) * 100.0
        ));
        if r.search_queries > 0 {
            out.push_str(&format!(", {} web searches", r.search_queries));
        }
        if r.image_tokens > 0 {
            out.push_str(&format!(", {} image tokens (pictures)", r.image_tokens));
        }
        let days: Vec<Option<f64>> = rows.iter().filter(|d| d.model == r.model).map(|d| cost(cfg, d, now_ms)).collect();
        if days.iter().any(Option::is_some) {
            let c: f64 = days.iter().flatten().sum();
            total += c;
            out.push_str(&format!(", ${c:.4}"));
        }
    }
    out.push_str(&format!("\nEstimated cost: ${total:.4}"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    const NOW: i64 = 1_795_651_200_000; // 2026-11-26T00:00:00Z

    fn cfg(prices: &str) -> Config {
        let mut vars = BTreeMap::new();
        vars.insert("PRICES".to_string(), prices.to_string());
        Config::from_vars(&vars)
    }

    fn row(model: &str, prompt: i64, out: i64, thinking: i64) -> ModelUsage {
        ModelUsage { model: model.into(), calls: 2, prompt_tokens: prompt, candidates_tokens: out, thoughts_tokens: thinking, cached_tokens: 5, ..Default::default() }
    }

    #[test]
    fn cached_input_is_billed_at_the_cached_price() {
        let c = cfg("m=2/10/0.5, n=4/8");
        let r = ModelUsage { model: "m".into(), calls: 1, prompt_tokens: 1_000_000, cached_tokens: 600_000, ..Default::default() };
        assert_eq!(cost(&c, &r, NOW), Some(0.4 * 2.0 + 0.6 * 0.5));
        let n = ModelUsage { model: "n".into(), cached_tokens: 1_000_000, ..r.clone() };
        assert_eq!(cost(&c, &n, NOW), Some(0.4), "a tenth of the input price when PRICES does not say");
        let odd = ModelUsage { cached_tokens: 5_000_000, ..r };
        assert_eq!(cost(&c, &odd, NOW), Some(0.5), "never more cached than prompt tokens");
    }

    #[test]
    fn image_output_tokens_are_billed_at_the_image_price() {
        let c = Config::from_vars(&BTreeMap::new());
        let call = ModelUsage { model: "gemini-nano-banana-2.1".into(), calls: 1, prompt_tokens: 100, candidates_tokens: 1130, image_tokens: 1120, ..Default::default() };
        let want = (100.0 * 1.50 + 10.0 * 7.50 + 1120.0 * 30.0) / 1e6;
        assert!(cost(&c, &call, NOW).is_some_and(|got| (got - want).abs() < 1e-12), "{:?} vs {want}", cost(&c, &call, NOW));
        assert!(chat_totals_text(&c, &[call], NOW).contains("1120 image tokens"));
    }

    /// A recorded turn of the default model, priced by hand from Google's page (read
    /// 2026-11-26): $0.75 input, $0.075 cached input, $3.75 output per million tokens through
    /// 2026; $1.50, $0.15, $7.50 from 2027.
    #[test]
    fn the_default_model_costs_what_googles_page_says_on_the_day_of_the_call() {
        let c = Config::from_vars(&BTreeMap::new());
        let turn = ModelUsage { model: "gemini-3.8-flash".into(), calls: 1, prompt_tokens: 400_000, cached_tokens: 300_000, candidates_tokens: 20_000, thoughts_tokens: 10_000, ..Default::default() };
        let promo = 100_000.0 * 0.75 / 1e6 + 300_000.0 * 0.075 / 1e6 + 30_000.0 * 3.75 / 1e6;
        let list = 100_000.0 * 1.50 / 1e6 + 300_000.0 * 0.15 / 1e6 + 30_000.0 * 7.50 / 1e6;
        let close = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 1e-12);
        assert!(close(cost(&c, &turn, NOW), promo), "{:?} vs {promo}", cost(&c, &turn, NOW));
        assert!((promo - 0.21).abs() < 1e-12);
        let in_2027 = crate::gemini::prices::PROMOTION_ENDS_MS + 86_400_000;
        assert!(close(cost(&c, &turn, in_2027), list), "a call of 2027 at the list price");
        // A row of 2026-12-31 read in 2027 keeps its day's promotional price.
        let old = ModelUsage { day: "2026-12-31".into(), ..turn.clone() };
        assert!(close(cost(&c, &old, in_2027), promo));
        let new = ModelUsage { day: "2027-01-01".into(), ..turn.clone() };
        assert!(close(cost(&c, &new, in_2027), list));
        // /usage adds the days up, each at its price.
        let text = chat_totals_text(&c, &[old, new], in_2027);
        assert!(text.contains("gemini-3.8-flash: 2 calls, 800000 input + 60000 output tokens (20000 thinking, 600000 cached: 75% of input), $0.6300"), "{text}");
        assert!(text.ends_with(&format!("Estimated cost: ${:.4}", promo + list)), "{text}");
    }

    #[test]
    fn thinking_is_billed_as_output_and_unknown_models_have_no_cost() {
        let c = cfg("m=2/10");
        let uncached = |r: ModelUsage| ModelUsage { cached_tokens: 0, ..r };
        assert_eq!(cost(&c, &uncached(row("m", 1_000_000, 100_000, 100_000)), NOW), Some(2.0 + 2.0));
        assert_eq!(cost(&c, &uncached(row("m-002", 500_000, 0, 0)), NOW), Some(1.0));
        assert_eq!(cost(&c, &row("other", 1_000_000, 0, 0), NOW), None);
    }

    #[test]
    fn the_usage_text_lists_each_model_and_totals_what_is_priced() {
        let c = cfg("m=2/10");
        let text = chat_totals_text(&c, &[row("m", 1_000_000, 100_000, 50_000), row("other", 10, 1, 0)], NOW);
        assert_eq!(
            text,
            "Model usage in this chat:\n\
             m: 2 calls, 1000000 input + 150000 output tokens (50000 thinking, 5 cached: 0% of input), $3.5000\n\
             other: 2 calls, 10 input + 1 output tokens (0 thinking, 5 cached: 50% of input)\n\
             Estimated cost: $3.5000"
        );
        assert_eq!(chat_totals_text(&c, &[], NOW), "No model calls in this chat yet.");
    }

    #[test]
    fn web_searches_are_counted_and_priced_per_query() {
        let mut vars = BTreeMap::new();
        vars.insert("PRICES".to_string(), "m=2/10".to_string());
        vars.insert("SEARCH_PRICE_PER_1000".to_string(), "14".to_string());
        let c = Config::from_vars(&vars);
        let r = ModelUsage { search_queries: 3, cached_tokens: 0, ..row("m", 0, 0, 0) };
        assert_eq!(cost(&c, &r, NOW), Some(3.0 * 14.0 / 1000.0));
        assert!(chat_totals_text(&c, &[r], NOW).contains("(0 thinking, 0 cached: 0% of input), 3 web searches, $0.0420"));
        // The default table's Gemini 3 search price.
        let d = Config::from_vars(&BTreeMap::new());
        let s = ModelUsage { search_queries: 1000, ..row("gemini-3.8-flash", 0, 0, 0) };
        assert_eq!(cost(&d, &s, NOW), Some(14.0));
    }

    #[test]
    fn the_cached_share_is_of_input_tokens() {
        let a = ModelUsage { prompt_tokens: 1000, cached_tokens: 750, ..Default::default() };
        let b = ModelUsage { prompt_tokens: 3000, cached_tokens: 9000, ..Default::default() };
        assert_eq!(cached_share(&a), Some(0.75));
        assert_eq!(cached_share(&b), Some(1.0), "never more than all of the input");
        assert_eq!(cached_share(&ModelUsage::default()), None);
        assert_eq!(total_cached_share(&[a, b]), Some(3750.0 / 4000.0));
    }
}

/// The Free plan's daily limits the headroom estimate compares with: Worker requests, D1 rows
/// read and written.
pub const FREE_PLAN_DAILY: FreePlanUse = FreePlanUse { worker_requests: 100_000, rows_read: 5_000_000, rows_written: 100_000 };

/// Per-message figures `npm run bench` measured (BENCHMARKS.md, "D1 rows per message"): an
/// update at the webhook (read, written) and a turn with its arrival and delivery.
pub const ROWS_PER_UPDATE: (u64, u64) = (19, 8);
pub const ROWS_PER_TURN: (u64, u64) = (29 + 32, 4 + 20);

/// A day's use of the Free plan's limits (or the limits themselves).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct FreePlanUse {
    pub worker_requests: u64,
    pub rows_read: u64,
    pub rows_written: u64,
}

/// An estimate, not a measurement: a day's updates and turns (the bot's own counts) times the
/// per-message figures the benchmark measured. No Cloudflare analytics are read.
pub fn free_plan_estimate(updates: u64, turns: u64) -> FreePlanUse {
    FreePlanUse {
        worker_requests: updates,
        rows_read: updates * ROWS_PER_UPDATE.0 + turns * ROWS_PER_TURN.0,
        rows_written: updates * ROWS_PER_UPDATE.1 + turns * ROWS_PER_TURN.1,
    }
}

#[cfg(test)]
mod free_plan_tests {
    use super::*;

    #[test]
    fn the_estimate_scales_the_measured_figures() {
        let e = free_plan_estimate(1000, 100);
        assert_eq!(e, FreePlanUse { worker_requests: 1000, rows_read: 19_000 + 6_100, rows_written: 8_000 + 2_400 });
        // 3,125 answered private messages a day fill the rows written (BENCHMARKS.md).
        assert!(free_plan_estimate(3_125, 3_125).rows_written >= FREE_PLAN_DAILY.rows_written);
    }
}
