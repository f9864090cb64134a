//! CPU: ours vs the crates, natively (release, opt-level "s", lto, as the worker profile).
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use cmp::{he_html, croner_cron, cronparser_cron, entities, gum_html, ours_cron, ours_html};
use std::hint::black_box;
use std::time::Instant;
use url::Url;

fn time<F: FnMut()>(label: &str, iters: u32, mut f: F) -> f64 {
    f(); // warm
    let t = Instant::now();
    for _ in 0..iters {
        f();
    }
    let per = t.elapsed().as_secs_f64() * 1e3 / iters as f64;
    println!("{label:60} {per:10.3} ms");
    per
}

fn main() {
    let after: DateTime<Utc> = "2026-11-25T08:00:00Z".parse().unwrap();
    println!("## cron: parse + next 1000 runs (each run from the previous)\n");
    for (c, tz) in [("30 9 * * 1-5", "Europe/Berlin"), ("*/15 * * * *", "America/New_York"), ("0 9 1 * mon", "UTC"), ("0 0 29 2 *", "UTC")] {
        let tz: Tz = tz.parse().unwrap();
        let runs = if c == "0 0 29 2 *" { 15 } else { 1000 };
        time(&format!("ours        {c:14} {runs} runs"), 20, || {
            let cr = ours_cron::Cron::parse(c).unwrap();
            let mut t = after;
            for _ in 0..runs { t = cr.next_after(tz, t).unwrap(); }
            black_box(t);
        });
        time(&format!("croner      {c:14} {runs} runs"), 20, || {
            let cr = croner_cron::Cron::parse(c).unwrap();
            let mut t = after;
            for _ in 0..runs { t = cr.next_after(tz, t).unwrap(); }
            black_box(t);
        });
        time(&format!("cron-parser {c:14} {runs} runs"), 20, || {
            let cr = cronparser_cron::Cron::parse(c).unwrap();
            let mut t = after;
            for _ in 0..runs { t = match cr.next_after(tz, t) { Some(x) => x, None => break }; }
            black_box(t);
        });
    }
    println!("\n## cron: one plan() check = parse + shortest gap over 61 runs; never-matching rule\n");
    let tz: Tz = "Europe/Berlin".parse().unwrap();
    time("ours   plan gap 0 9 * * 1-5", 200, || { black_box(ours_cron::Cron::parse("0 9 * * 1-5").unwrap().shortest_gap(tz, after)); });
    time("croner plan gap 0 9 * * 1-5", 200, || { black_box(croner_cron::Cron::parse("0 9 * * 1-5").unwrap().shortest_gap(tz, after)); });
    time("ours   0 0 30 2 * (searches 5 years, None)", 20, || { black_box(ours_cron::Cron::parse("0 0 30 2 *").unwrap().next_after(tz, after)); });
    time("croner 0 0 30 2 * (None)", 20, || { black_box(croner_cron::Cron::parse("0 0 30 2 *").unwrap().next_after(tz, after)); });

    println!("\n## HTML: html_to_text (40k cap) and links_in_html per page\n");
    let base = Url::parse("https://example.com/dir/page").unwrap();
    let mut pages: Vec<(String, String)> = ["mdbook-print.html", "lints.html", "std-string.html", "src-fs.html"]
        .iter()
        .map(|f| (f.to_string(), std::fs::read_to_string(format!("/work/libs-eval/pages/{f}")).unwrap()))
        .collect();
    // A synthetic ~200 KB news-like page: nav links, paragraphs with entities, inline scripts.
    let mut syn = String::from("<!doctype html><html><head><title>News &amp; more</title><style>body{}</style></head><body>");
    let mut i = 0;
    while syn.len() < 200_000 {
        syn.push_str(&format!("<nav><a href=\"/s/{i}\">Section {i}</a> | <a href='https://other.example/x?a={i}&amp;b=2'>ext</a></nav>\
            <article><h2>Headline {i} &mdash; caf&eacute;</h2><p>Some <b>bold</b> text &amp; more text &lt;here&gt; with&nbsp;spaces, &#8220;quotes&#8221; and a <a href=\"rel/{i}.html#frag\">link</a>.</p>\
            <script>var x{i} = \"<a href=/js>\"; if (a < b) {{}}</script><!-- comment {i} --></article>"));
        i += 1;
    }
    syn.push_str("</body></html>");
    pages.push(("synthetic-200KB".into(), syn));
    for (name, html) in &pages {
        let kb = html.len() / 1024;
        let a = time(&format!("ours     html_to_text  {name} ({kb} KB)"), 30, || { black_box(ours_html::html_to_text(html, 40_000)); });
        let b = time(&format!("html5gum html_to_text  {name} ({kb} KB)"), 30, || { black_box(gum_html::html_to_text(html, 40_000)); });
        time(&format!("ours+html-escape html_to_text {name}"), 30, || { black_box(he_html::html_to_text(html, 40_000)); });
        time(&format!("ours+html-escape links_in_html {name}"), 30, || { black_box(he_html::links_in_html(html, &base)); });
        let c = time(&format!("ours     links_in_html {name}"), 30, || { black_box(ours_html::links_in_html(html, &base)); });
        let d = time(&format!("html5gum links_in_html {name}"), 30, || { black_box(gum_html::links_in_html(html, &base)); });
        println!("   -> html5gum/ours: text x{:.2}, links x{:.2}\n", b / a, d / c);
    }
    println!("## entities: decode a 200 KB text with many entities\n");
    let ent: String = "caf&eacute; &amp; &lt;b&gt; &#8212; plain words here and there &quot;q&quot; &nbsp; ".repeat(2600);
    time("ours        decode_entities", 30, || { black_box(ours_html::decode_entities(&ent)); });
    time("htmlize     unescape", 30, || { black_box(entities::htmlize(&ent)); });
    time("htmlize     unescape_attribute", 30, || { black_box(entities::htmlize_attr(&ent)); });
    time("html-escape decode_html_entities", 30, || { black_box(entities::html_escape(&ent)); });
    let href = "https://example.com/search?q=rust&amp;page=2&amp;lang=en";
    time("ours        decode href x10000", 10, || { for _ in 0..10000 { black_box(ours_html::decode_entities(href)); } });
    time("html-escape decode href x10000", 10, || { for _ in 0..10000 { black_box(entities::html_escape(href)); } });
}
