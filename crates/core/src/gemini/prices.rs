//! What Gemini costs: one price schema per model (input, cached input, output, a search's
//! price, image output) with the dates each price holds, and the default table.
//!
//! Source of the default table: Google's price page, <https://ai.google.dev/gemini-api/docs/pricing>
//! (Gemini Developer API, paid tier, "Standard"), read 2026-11-26: Gemini 3 models bill cache
//! reads at a tenth of the input price; the default model, `gemini-3.8-flash`, is on a
//! promotional price through 2026-12-31 ($0.75 input, $3.75 output per million tokens) and at
//! its list price from 2027-01-01 ($1.50, $7.50); Grounding with Google Search on Gemini 3 models
//! is $14 per 1,000 search queries after 5,000 free a month (the estimate does not subtract the
//! free ones). Prompts over 200k tokens (the Pro models' higher tier) and the Batch and Flex
//! prices are not modelled: turns here are far below 200k tokens and use the standard API.
//!
//! Invariant: pure. The time a price is asked for is passed in (a call's own time); a model the
//! table does not know has no price, never a guessed one.

/// USD per million tokens, one image, or 1,000 searches, as the page states them.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelPrice {
    /// The model id, or its stem: `gemini-3.8-flash` also prices `gemini-3.8-flash-001`.
    pub model: String,
    /// Input tokens (text, image, video; the page's audio price is not modelled).
    pub input: f64,
    /// Input tokens served from Gemini's cache (`cachedContentTokenCount`).
    pub cached_input: f64,
    /// Output tokens, thinking included.
    pub output: f64,
    /// USD per 1,000 Google Search queries a grounded call ran; `None`: the model has no
    /// search price of its own (`SEARCH_PRICE_PER_1000` applies).
    pub search_per_1000: Option<f64>,
    /// Image output, for models that make pictures.
    pub image_output: Option<ImagePrice>,
    /// The price holds from this time (ms since the epoch, inclusive; `None`: always before).
    pub from_ms: Option<i64>,
    /// ...until this time (exclusive; `None`: no end announced).
    pub until_ms: Option<i64>,
}

/// Image output as the page prices it: per million output tokens, and how many tokens one
/// image of the default size counts as (so a picture's price is `tokens_per_image` of them).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ImagePrice {
    pub per_million_tokens: f64,
    pub tokens_per_image: u32,
}

impl ImagePrice {
    /// USD for one image.
    pub fn per_image(&self) -> f64 {
        self.per_million_tokens * f64::from(self.tokens_per_image) / 1e6
    }
}

/// What a cached input token costs, as a share of an input token, when a price does not say:
/// a tenth, as the page bills cache reads for every Gemini 3 model.
pub const CACHED_SHARE_OF_INPUT: f64 = 0.1;

/// The page's price for Grounding with Google Search on Gemini 3 models, per 1,000 queries.
pub const SEARCH_PER_1000: f64 = 14.0;

/// 2027-01-01T00:00:00Z: the end of the promotional prices.
pub const PROMOTION_ENDS_MS: i64 = 1_798_761_600_000;

impl ModelPrice {
    /// A price with no dates and no search or image price: `PRICES` entries.
    pub fn flat(model: &str, input: f64, output: f64, cached_input: Option<f64>) -> Self {
        ModelPrice {
            model: model.to_string(),
            input,
            cached_input: cached_input.unwrap_or(input * CACHED_SHARE_OF_INPUT),
            output,
            search_per_1000: None,
            image_output: None,
            from_ms: None,
            until_ms: None,
        }
    }

    /// Whether this entry prices `model` (the same id, or a version of it).
    pub fn matches(&self, model: &str) -> bool {
        model == self.model || model.strip_prefix(self.model.as_str()).is_some_and(|rest| rest.starts_with('-'))
    }

    /// Whether the price holds at `at_ms`.
    pub fn holds_at(&self, at_ms: i64) -> bool {
        self.from_ms.map_or(true, |f| at_ms >= f) && self.until_ms.map_or(true, |u| at_ms < u)
    }
}

/// The price of `model` at `at_ms` in `table`: of the entries that match and hold then, the
/// one naming the model most exactly (`gemini-3.5-flash-lite` is not `gemini-3.5-flash`'s).
pub fn price_at<'a>(table: &'a [ModelPrice], model: &str, at_ms: i64) -> Option<&'a ModelPrice> {
    table.iter().filter(|p| p.matches(model) && p.holds_at(at_ms)).max_by_key(|p| p.model.len())
}

/// The times at which some price of `table` starts or ends, ascending: between two of them every
/// model's price is the same, so usage summed over such a stretch can be priced as one.
pub fn boundaries(table: &[ModelPrice]) -> Vec<i64> {
    let mut at: Vec<i64> = table.iter().flat_map(|p| [p.from_ms, p.until_ms]).flatten().collect();
    crate::order::sort(&mut at);
    at.dedup();
    at
}

/// A Gemini 3 text model's price as the page states it (input, cache reads, output), with the
/// Gemini 3 search price.
fn gemini3(model: &str, [input, cached, output]: [f64; 3], from_ms: Option<i64>, until_ms: Option<i64>) -> ModelPrice {
    ModelPrice { search_per_1000: Some(SEARCH_PER_1000), from_ms, until_ms, ..ModelPrice::flat(model, input, output, Some(cached)) }
}

/// The default table (`PRICES` replaces it): Google's page as read on 2026-11-26 (above).
pub fn default_prices() -> Vec<ModelPrice> {
    let promo = Some(PROMOTION_ENDS_MS);
    let list = Some(PROMOTION_ENDS_MS);
    vec![
        // The default model and its predecessor: promotional until the end of 2026.
        gemini3("gemini-3.8-flash", [0.75, 0.075, 3.75], None, promo),
        gemini3("gemini-3.8-flash", [1.50, 0.15, 7.50], list, None),
        gemini3("gemini-3.6-flash", [0.75, 0.075, 3.75], None, promo),
        gemini3("gemini-3.6-flash", [1.50, 0.15, 7.50], list, None),
        gemini3("gemini-3.5-flash", [1.50, 0.15, 9.00], None, None),
        // `MEDIA_MODEL`'s default.
        gemini3("gemini-3.5-flash-lite", [0.30, 0.03, 2.50], None, None),
        gemini3("gemini-3.1-flash-lite", [0.25, 0.025, 1.50], None, None),
        // `IMAGE_MODEL`'s default (`core::image::DEFAULT_IMAGE_MODEL`), Nano Banana 2.1: text
        // input $1.50 and text output $7.50 per million tokens, image output $30 per million
        // tokens, a 1K picture counting 1,120 tokens ($0.0336). Sources: Google's model list
        // (https://firebase.google.com/docs/ai-logic/count-tokens, read 2026-11-26) names the
        // model; the prices as LiteLLM published them at its launch
        // (https://github.com/BerriAI/litellm/discussions/44983); 1,120 output tokens for a
        // 1K picture as Google's Vertex AI model page states it for Gemini 3.1 Flash Image
        // (https://docs.cloud.google.com/vertex-ai/generative-ai/docs/models/gemini/3-1-flash-image).
        // Google's own price page was not in reach; check it with `PRICES` before relying on these.
        ModelPrice {
            image_output: Some(ImagePrice { per_million_tokens: 30.0, tokens_per_image: 1120 }),
            ..ModelPrice::flat("gemini-nano-banana-2.1", 1.50, 7.50, None)
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOV_2026: i64 = 1_795_651_200_000; // 2026-11-26T00:00:00Z

    #[test]
    fn the_default_model_is_promotional_until_the_end_of_2026_then_at_its_list_price() {
        let t = default_prices();
        let now = price_at(&t, "gemini-3.8-flash", NOV_2026).unwrap();
        assert_eq!((now.input, now.cached_input, now.output), (0.75, 0.075, 3.75));
        let last = price_at(&t, "gemini-3.8-flash", PROMOTION_ENDS_MS - 1).unwrap();
        assert_eq!(last.input, 0.75, "the last millisecond of 2026");
        let later = price_at(&t, "gemini-3.8-flash-001", PROMOTION_ENDS_MS).unwrap();
        assert_eq!((later.input, later.cached_input, later.output), (1.50, 0.15, 7.50));
        assert_eq!(later.search_per_1000, Some(14.0));
        // 2027-01-01 in UTC, as the constant says.
        assert_eq!(PROMOTION_ENDS_MS, (365 * 57 + 14) * 86_400_000);
    }

    #[test]
    fn gemini_3_cache_reads_are_a_tenth_of_the_input_price() {
        for p in default_prices() {
            assert!((p.cached_input - p.input / 10.0).abs() < 1e-12, "{}", p.model);
        }
        assert!((ModelPrice::flat("m", 2.0, 10.0, None).cached_input - 0.2).abs() < 1e-12);
        assert_eq!(ModelPrice::flat("m", 2.0, 10.0, Some(0.5)).cached_input, 0.5);
    }

    #[test]
    fn versions_match_and_other_models_have_no_price() {
        let t = default_prices();
        assert!(price_at(&t, "gemini-3.5-flash-lite", NOV_2026).is_some());
        assert_eq!(price_at(&t, "gemini-3.5-flash", NOV_2026).unwrap().output, 9.0);
        assert_eq!(price_at(&t, "gemini-3.5-flash-lite-002", NOV_2026).unwrap().model, "gemini-3.5-flash-lite");
        assert!(price_at(&t, "gemini-3.8-flashy", NOV_2026).is_none());
        assert!(price_at(&t, "gpt-5", NOV_2026).is_none());
        let image = price_at(&t, crate::image::DEFAULT_IMAGE_MODEL, NOV_2026).unwrap().image_output.unwrap();
        assert!((image.per_image() - 0.0336).abs() < 1e-12);
    }

    #[test]
    fn prices_change_only_at_the_boundaries() {
        assert_eq!(boundaries(&default_prices()), vec![PROMOTION_ENDS_MS]);
        assert!(boundaries(&[ModelPrice::flat("m", 1.0, 2.0, None)]).is_empty());
    }

    #[test]
    fn an_image_price_is_its_tokens_at_the_image_output_price() {
        let p = ImagePrice { per_million_tokens: 30.0, tokens_per_image: 1290 };
        assert!((p.per_image() - 0.0387).abs() < 1e-12);
    }
}
