//! Renders a report page in headless Chromium: the plots the page's script drew (read from the
//! `data-plots` attribute it sets on `<body>` once every plot is drawn, through `--dump-dom`)
//! and a screenshot of the whole page at one CSS pixel per pixel, decoded. Shared by the
//! rendering test and the README screenshot example (`examples/screenshots.rs`).

#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

/// One subplot's plot area, in page pixels.
#[derive(Clone, Debug)]
pub struct Area {
    pub id: String,
    pub x: usize,
    pub y: usize,
    pub w: usize,
    pub h: usize,
}

/// Visible traces of a figure by role (their `meta`): the min–max band's edges, the runs'
/// mean, the per-run lines, a one-run configuration's line, and the rest (heat maps).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Roles {
    pub band: usize,
    pub mean: usize,
    pub run: usize,
    pub both: usize,
    pub other: usize,
}

/// One figure as drawn: its div's id, kind, the traces the browser's DOM holds, its box and
/// its subplots.
#[derive(Clone, Debug)]
pub struct Plot {
    pub id: String,
    pub kind: String,
    pub traces: usize,
    /// The figure's `<div>`, and the width plotly drew the figure at (its SVG's).
    pub div: Area,
    pub svg: usize,
    pub subplots: Vec<Area>,
    /// A heat map's tooltip of its first cell (the first block at the first snapshot).
    pub tip: Option<String>,
    /// The tick values plotly drew on each axis (`xaxis`, `yaxis2`, ...).
    pub ticks: std::collections::BTreeMap<String, Vec<f64>>,
    /// Visible traces by role.
    pub roles: Roles,
    /// Filled areas drawn (the bands: `path.js-fill` with a shape).
    pub fills: usize,
}

/// A figure's traces shown after the page's toggle was clicked.
#[derive(Clone, Debug)]
pub struct Shown {
    pub kind: String,
    /// Traces drawn, visible traces by role, band fills drawn.
    pub traces: usize,
    pub roles: Roles,
    pub fills: usize,
}

/// What the page's script recorded once every plot was drawn.
#[derive(Clone, Debug)]
pub struct Drawn {
    /// The page's height, the window's width and the width of `<main>`'s content.
    pub height: usize,
    pub viewport: usize,
    pub main: usize,
    pub plots: Vec<Plot>,
    /// Opened as `#per-run`: after the page clicked its toggle, the toggle's state and what
    /// each figure shows.
    pub per_run: Option<(bool, Vec<Shown>)>,
}

/// A decoded RGB screenshot.
pub struct Shot {
    pub width: usize,
    pub height: usize,
    pub rgb: Vec<u8>,
}

impl Shot {
    pub fn pixel(&self, x: usize, y: usize) -> [u8; 3] {
        let i = (y * self.width + x) * 3;
        [self.rgb[i], self.rgb[i + 1], self.rgb[i + 2]]
    }

    /// Pixels of `a` whose channels spread by more than 60 (drawn colour, not white, grey
    /// grid lines or black text).
    pub fn coloured(&self, a: &Area) -> usize {
        self.count(a, |p| {
            let (mx, mn) = (p.iter().max().unwrap(), p.iter().min().unwrap());
            mx - mn > 60
        })
    }

    /// Pixels of `a` that are not white (a channel below 245).
    pub fn non_white(&self, a: &Area) -> usize {
        self.count(a, |p| p.iter().any(|&c| c < 245))
    }

    /// Pixels of `a` within 40 (per channel) of `#rrggbb`.
    pub fn near(&self, a: &Area, hex: &str) -> usize {
        self.near_within(a, hex, 40)
    }

    /// Pixels of `a` within `tol` (per channel) of `#rrggbb`.
    pub fn near_within(&self, a: &Area, hex: &str, tol: i32) -> usize {
        let c: Vec<i32> = (0..3)
            .map(|i| i32::from_str_radix(&hex[1 + 2 * i..3 + 2 * i], 16).unwrap())
            .collect();
        self.count(a, |p| (0..3).all(|i| (p[i] as i32 - c[i]).abs() <= tol))
    }

    /// Pixels of `a` within `tol` of `#rrggbb` whose neighbours two pixels up and down are
    /// too: a filled area's, not the anti-aliased edge of a line in another colour.
    pub fn filled_within(&self, a: &Area, hex: &str, tol: i32) -> usize {
        let c: Vec<i32> = (0..3)
            .map(|i| i32::from_str_radix(&hex[1 + 2 * i..3 + 2 * i], 16).unwrap())
            .collect();
        let near = |x: usize, y: usize| {
            let p = self.pixel(x, y);
            (0..3).all(|i| (p[i] as i32 - c[i]).abs() <= tol)
        };
        let mut n = 0;
        for y in (a.y + 2)..(a.y + a.h).min(self.height).saturating_sub(2) {
            for x in a.x..(a.x + a.w).min(self.width) {
                n += (near(x, y) && near(x, y - 2) && near(x, y - 1) && near(x, y + 1) && near(x, y + 2))
                    as usize;
            }
        }
        n
    }

    fn count(&self, a: &Area, f: impl Fn([u8; 3]) -> bool) -> usize {
        let mut n = 0;
        for y in a.y..(a.y + a.h).min(self.height) {
            for x in a.x..(a.x + a.w).min(self.width) {
                n += f(self.pixel(x, y)) as usize;
            }
        }
        n
    }

    /// Writes the part `(x, y, w, h)` of the screenshot as a PNG.
    pub fn crop(&self, x: usize, y: usize, w: usize, h: usize, out: &Path) {
        let (w, h) = (w.min(self.width - x), h.min(self.height - y));
        let mut data = Vec::with_capacity(w * h * 3);
        for row in y..y + h {
            let i = (row * self.width + x) * 3;
            data.extend_from_slice(&self.rgb[i..i + w * 3]);
        }
        let f = std::fs::File::create(out).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
        let mut enc = png::Encoder::new(std::io::BufWriter::new(f), w as u32, h as u32);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        enc.set_compression(png::Compression::Best);
        enc.write_header().unwrap().write_image_data(&data).unwrap();
    }
}

/// The Chromium binary, if one is installed.
pub fn chromium() -> Option<String> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            Command::new(b)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .map(str::to_string)
}

const FLAGS: [&str; 9] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
    "--no-first-run",
    "--disable-extensions",
    "--disable-background-networking",
];

/// Window width of the rendering test: the page must use at least 95 % of it.
pub const WINDOW_WIDTH: usize = 1600;

fn area(a: &serde_json::Value, id: &str) -> Area {
    let n = |k: &str| a[k].as_u64().unwrap_or_else(|| panic!("{id}: no {k} in {a}")) as usize;
    Area {
        id: id.to_string(),
        x: n("x"),
        y: n("y"),
        w: n("w"),
        h: n("h"),
    }
}

fn roles(v: &serde_json::Value) -> Roles {
    let n = |k: &str| v[k].as_u64().unwrap_or(0) as usize;
    Roles {
        band: n("band"),
        mean: n("mean"),
        run: n("run"),
        both: n("both"),
        other: n("other"),
    }
}

/// Opens `page` (with `#hash` unless empty) in a window `width` pixels wide: the DOM after the
/// scripts ran and what the page's script recorded.
pub fn draw(bin: &str, page: &Path, width: usize, hash: &str) -> (String, Drawn) {
    let mut url = format!("file://{}", page.display());
    if !hash.is_empty() {
        url = format!("{url}#{hash}");
    }
    let dom = Command::new(bin)
        .args(FLAGS)
        .arg("--virtual-time-budget=5000")
        // The screenshot's width, so that text wraps, and the plots sit, as in the screenshot.
        .arg(format!("--window-size={width},1000"))
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .unwrap();
    assert!(dom.status.success(), "{}", String::from_utf8_lossy(&dom.stderr));
    let dom = String::from_utf8_lossy(&dom.stdout).into_owned();
    let attr = dom
        .split_once("data-plots=\"")
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(v, _)| {
            v.replace("&quot;", "\"")
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&amp;", "&")
        })
        .unwrap_or_else(|| panic!("the page's script did not finish drawing (no data-plots on <body>)"));
    let v: serde_json::Value = serde_json::from_str(&attr).unwrap();
    let n = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("no {k} in data-plots")) as usize;
    let plots = v["plots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| Plot {
            id: p["id"].as_str().unwrap().to_string(),
            kind: p["kind"].as_str().unwrap().to_string(),
            traces: p["traces"].as_u64().unwrap() as usize,
            div: area(&p["div"], "div"),
            svg: p["svg"].as_u64().unwrap() as usize,
            subplots: p["subplots"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| area(a, a["id"].as_str().unwrap()))
                .collect(),
            tip: p["tip"].as_str().map(str::to_string),
            ticks: p["ticks"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, t)| {
                    let vals = t.as_array().unwrap().iter().filter_map(|x| x.as_f64()).collect();
                    (k.clone(), vals)
                })
                .collect(),
            roles: roles(&p["roles"]),
            fills: p["fills"].as_u64().unwrap() as usize,
        })
        .collect();
    let per_run = v.get("per_run").map(|pr| {
        let shown = pr["plots"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| Shown {
                kind: p["kind"].as_str().unwrap().to_string(),
                traces: p["traces"].as_u64().unwrap() as usize,
                roles: roles(&p["roles"]),
                fills: p["fills"].as_u64().unwrap() as usize,
            })
            .collect();
        (pr["checked"].as_bool().unwrap(), shown)
    });
    (
        dom,
        Drawn {
            height: n("height"),
            viewport: n("viewport"),
            main: n("main"),
            plots,
            per_run,
        },
    )
}

/// A screenshot of the whole of `page` (`height` pixels tall) in a window `width` pixels wide,
/// decoded.
pub fn screenshot(bin: &str, page: &Path, width: usize, height: usize, hash: &str) -> Shot {
    let mut url = format!("file://{}", page.display());
    if !hash.is_empty() {
        url = format!("{url}#{hash}");
    }
    let png_path = page.with_extension(format!("{width}{hash}.png"));
    let shot = Command::new(bin)
        .args(FLAGS)
        .arg("--virtual-time-budget=5000")
        .arg(format!("--screenshot={}", png_path.display()))
        .arg(format!("--window-size={width},{height}"))
        .arg(&url)
        .output()
        .unwrap();
    assert!(shot.status.success(), "{}", String::from_utf8_lossy(&shot.stderr));
    let decoder = png::Decoder::new(std::fs::File::open(&png_path).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let (w, h) = (info.width as usize, info.height as usize);
    let channels = match info.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        c => panic!("unexpected screenshot colour type {c:?}"),
    };
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    let rgb = buf[..info.buffer_size()]
        .chunks(channels)
        .flat_map(|p| [p[0], p[1], p[2]])
        .collect();
    std::fs::remove_file(&png_path).ok();
    Shot {
        width: w,
        height: h,
        rgb,
    }
}

/// Renders `page` in a window `width` pixels wide: the DOM after the scripts ran, what the
/// page's script recorded, and a screenshot of the whole page.
pub fn render(bin: &str, page: &Path, width: usize) -> (String, Drawn, Shot) {
    let (dom, drawn) = draw(bin, page, width, "");
    let shot = screenshot(bin, page, width, drawn.height, "");
    (dom, drawn, shot)
}
