//! Runs agent_core::fetch's HTML test cases (and probes, and real pages) against ours and the
//! html5gum-based version; and entity decoding against htmlize / html-escape.
use cmp::{he_html, entities, gum_html, ours_html};
use url::Url;

fn main() {
    let mut fails: Vec<String> = Vec::new();
    println!("## html_to_text / links_in_html: the asserted cases of fetch.rs tests\n");
    let html = "<html><head><title>T &amp; C</title><style>p{}</style><script>alert(1)</script></head>\
                <body><h1>Hello</h1><p>One&nbsp;<b>two</b> &lt;three&gt;</p><!-- hidden --><ul><li>a</li><li>b</li></ul></body></html>";
    let want = "T & C\n\nHello\nOne two <three>\na\nb";
    for (name, f) in [("ours", ours_html::html_to_text as fn(&str, usize) -> String), ("html5gum", gum_html::html_to_text), ("ours+html-escape", he_html::html_to_text)] {
        let got = f(html, 1000);
        println!("{name}: html_becomes_readable_text: {}", if got == want { "ok".to_string() } else { format!("DIFF {got:?}") });
        if got != want { fails.push(format!("{name}: html_to_text = {got:?}")); }
        let long = format!("<p>{}</p>", "x".repeat(100));
        let cut = f(&long, 10);
        println!("{name}: cut: {}", if cut.ends_with("[… cut]") { "ok" } else { "DIFF" });
        let page = "<p>Hi <a href=\"/x#f\">x</a> <a href='y.html'>y</a> <a href=mailto:a@b.c>m</a></p>";
        let t = f(page, 40_000);
        println!("{name}: read_page text: {}", if t == "Hi x y m" { "ok".to_string() } else { format!("DIFF {t:?}") });
        if t != "Hi x y m" { fails.push(format!("{name}: read_page text {t:?}")); }
    }
    let base = Url::parse("https://example.com/dir/page").unwrap();
    let page = "<p>Hi <a href=\"/x#f\">x</a> <a href='y.html'>y</a> <a href=mailto:a@b.c>m</a></p>";
    let want_links = vec!["https://example.com/x", "https://example.com/dir/y.html"];
    for (name, f) in [("ours", ours_html::links_in_html as fn(&str, &Url) -> Vec<String>), ("html5gum", gum_html::links_in_html), ("ours+html-escape", he_html::links_in_html)] {
        let got = f(page, &base);
        println!("{name}: read_page links: {}", if got == want_links { "ok".to_string() } else { format!("DIFF {got:?}") });
        if got != want_links { fails.push(format!("{name}: links {got:?}")); }
    }

    println!("\n## probes (behaviour comparison; * = differs)\n");
    let probes = [
        "<p>a<script>if (a<b && c>d) { x() }</script>b</p>",
        "<img alt=\"a > b\" src=x.png>text",
        "<!-- <a href=\"/hidden\">h</a> -->visible",
        "<p>text mentioning href=/in-text here</p>",
        "<a href = \"/spaced\">s</a>",
        "<A HREF=\"/UPPER\">u</A>",
        "<p>caf&eacute; &amp;c &copy; &hellip; &mdash; &#8212; &#x2014; &rsquo;</p>",
        "<p>AT&T &amp R&D &ampx &notit; &lt</p>",
        "<pre>line1\n   line2</pre>",
        "<p>unclosed <script>var x = '</p>';",
        "<div>x</div ><div>y</div>",
        "<title>Only title</title><p>body</p>",
        "<TITLE>Upper &amp; title</TITLE><P>body</P>",
        "<textarea><b>not bold</b></textarea>",
        "<p>x<br/>y<br>z</p>",
        "<![CDATA[ cdata ]]>after",
        "<svg><text>in svg</text></svg>after",
        "<p>tab\tand\u{a0}nbsp</p>",
        "<a href=\"https://e.com/?a=1&amp;b=2\">q</a><a href=\"https://e.com/?a=1&b=2&copy=3\">r</a>",
        "<a href=\"javascript:alert(1)\">j</a><link rel=stylesheet href=\"/s.css\"><base href=\"/b/\">",
        "<p>1 < 2 and 3 > 2</p>",
        "<p>a</p><head><title>late head</title></head><p>b</p>",
        "<noscript><p>enable js</p></noscript><p>real</p>",
        "<p>incomplete <b",
    ];
    for p in probes {
        let (a, b) = (ours_html::html_to_text(p, 1000), gum_html::html_to_text(p, 1000));
        let (la, lb) = (ours_html::links_in_html(p, &base), gum_html::links_in_html(p, &base));
        let c = he_html::html_to_text(p, 1000);
        let mark = if a != b || la != lb || c != a { "*" } else { " " };
        println!("{mark} {p:?}\n    ours text {a:?}\n    gum  text {b:?}\n    o+he text {c:?}");
        if la != lb || !la.is_empty() {
            println!("    ours links {la:?}\n    gum  links {lb:?}");
        }
    }

    println!("\n## real pages (rustdoc/mdbook, 230-640 KB)\n");
    for f in ["mdbook-print.html", "lints.html", "std-string.html", "src-fs.html"] {
        let html = std::fs::read_to_string(format!("/work/libs-eval/pages/{f}")).unwrap();
        let (a, b) = (ours_html::html_to_text(&html, usize::MAX), gum_html::html_to_text(&html, usize::MAX));
        let (la, lb) = (ours_html::links_in_html(&html, &base), gum_html::links_in_html(&html, &base));
        let he = he_html::html_to_text(&html, usize::MAX);
        println!("{f}: ours+html-escape text identical to ours: {}, to html5gum: {}", he == a, he == b);
        let al: Vec<&str> = a.lines().collect();
        let bl: Vec<&str> = b.lines().collect();
        let same_lines = al.iter().filter(|l| bl.contains(l)).count();
        let first_diff = al.iter().zip(&bl).position(|(x, y)| x != y);
        println!("{f}: text {} vs {} chars, lines {} vs {} ({} of ours found in gum's), identical={}; links {} vs {}, identical={}",
            a.chars().count(), b.chars().count(), al.len(), bl.len(), same_lines, a == b, la.len(), lb.len(), la == lb);
        if let Some(i) = first_diff {
            println!("   first differing line {i}: ours {:?} | gum {:?}", al[i].chars().take(100).collect::<String>(), bl[i].chars().take(100).collect::<String>());
        }
        let only_a: Vec<_> = la.iter().filter(|l| !lb.contains(l)).take(3).collect();
        let only_b: Vec<_> = lb.iter().filter(|l| !la.contains(l)).take(3).collect();
        if !only_a.is_empty() || !only_b.is_empty() {
            println!("   links only ours {only_a:?} / only gum {only_b:?}");
        }
    }

    println!("\n## entity decoding (ours vs htmlize::unescape vs htmlize::unescape_attribute vs html_escape)\n");
    let ents = [
        "&amp;", "&lt;&gt;", "&quot;", "&#39;", "&#x27;", "&apos;", "&nbsp;", "&eacute;", "&copy;", "&amp", "&ampx",
        "&notit;", "&#128512;", "&#0;", "&#xD800;", "&#x110000;", "&unknown;", "a & b", "&&amp;", "&#x41", "&#65;",
        "https://e.com/?a=1&amp;b=2", "https://e.com/?a=1&b=2&copy=3", "&verylongentityname;",
    ];
    for e in ents {
        let r = [ours_html::decode_entities(e), entities::htmlize(e), entities::htmlize_attr(e), entities::html_escape(e)];
        let mark = if r.iter().any(|x| *x != r[0]) { "*" } else { " " };
        println!("{mark} {e:32} ours {:?} | htmlize {:?} | htmlize_attr {:?} | html_escape {:?}", r[0], r[1], r[2], r[3]);
    }
    // reply_links: hrefs written by pulldown-cmark's escape_href (& → &amp;, ' → &#x27;, and &#39; by some versions)
    for e in ["https://e.com/?a=1&amp;b=2", "https://e.com/it&#x27;s", "https://e.com/it&#39;s"] {
        let r = [ours_html::decode_entities(e), entities::htmlize_attr(e), entities::html_escape(e)];
        println!("  href {e:34} ours {:?} | htmlize_attr {:?} | html_escape {:?}", r[0], r[1], r[2]);
    }

    println!("\n## no-panic fuzz (the proptest outside_text_never_panics, 20000 random inputs)\n");
    let mut seed = 0x1234_5678_9abc_def0u64;
    let alphabet: Vec<char> = "<>/=\"' &;#x!-abhref:ptsciyl1é\u{a0}\n".chars().collect();
    for _ in 0..20_000 {
        let mut s = String::new();
        for p in ["", "<a href=\"", "href='", "<script>", "<!--"][(seed % 5) as usize].chars() { s.push(p); }
        for _ in 0..(seed % 80) {
            seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17;
            s.push(alphabet[(seed % alphabet.len() as u64) as usize]);
        }
        seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17;
        let _ = gum_html::html_to_text(&s, 100);
        let _ = gum_html::links_in_html(&s, &base);
        let _ = entities::htmlize(&s);
        let _ = entities::html_escape(&s);
    }
    println!("no panic");
    println!("\n## failures against OUR tests: {}", fails.len());
    for f in fails { println!("  - {f}"); }
}
