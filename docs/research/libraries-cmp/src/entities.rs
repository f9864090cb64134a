//! decode_entities on top of entity crates.
pub fn htmlize(s: &str) -> String {
    htmlize::unescape(s).into_owned()
}
pub fn htmlize_attr(s: &str) -> String {
    htmlize::unescape_attribute(s).into_owned()
}
pub fn html_escape(s: &str) -> String {
    html_escape::decode_html_entities(s).into_owned()
}
