//! The progress bar of `bench run` and `bench compare`: indicatif on stderr, hidden when stderr
//! is not a terminal (or when the caller asks, e.g. for `--json`), so scripts see clean output.
//!
//! A measured run draws a bar of elapsed time against the run's duration with the operations
//! measured so far; the load phase draws a spinner, since loads are short next to the runs.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::net::run::ProgressFactory;
use crate::net::runner::Progress;

/// Redraws per second at most.
const REFRESH_PER_SEC: u8 = 10;

pub struct Bars {
    visible: bool,
    current: Mutex<Option<ProgressBar>>,
}

impl Bars {
    /// Bars on stderr when `visible` and stderr is a terminal.
    pub fn new(visible: bool) -> Bars {
        Bars {
            visible: visible && std::io::IsTerminal::is_terminal(&std::io::stderr()),
            current: Mutex::new(None),
        }
    }

    fn bar(&self, len: u64, style: ProgressStyle, message: String) -> ProgressBar {
        let target = if self.visible {
            ProgressDrawTarget::stderr_with_hz(REFRESH_PER_SEC)
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(Some(len), target)
            .with_style(style)
            .with_message(message);
        bar.enable_steady_tick(Duration::from_millis(100));
        *self.current.lock().expect("progress lock") = Some(bar.clone());
        bar
    }
}

struct Timed {
    bar: ProgressBar,
    started: Instant,
}

impl Progress for Timed {
    fn measured(&self, done: u64) {
        self.bar
            .set_position(self.started.elapsed().as_millis() as u64);
        self.bar.set_message(format!("{done} ops"));
    }
}

struct Spinner;
impl Progress for Spinner {}

impl ProgressFactory for Bars {
    fn loading(&self, keys: u64) -> Arc<dyn Progress> {
        let style =
            ProgressStyle::with_template("{spinner} {msg} {elapsed}").expect("static template");
        self.bar(keys, style, format!("loading {keys} keys"));
        Arc::new(Spinner)
    }

    fn measuring(&self, label: &str, duration: Duration) -> Arc<dyn Progress> {
        let style =
            ProgressStyle::with_template("{prefix:>20} [{bar:30}] {elapsed}/{duration} {msg}")
                .expect("static template")
                .progress_chars("=> ");
        let bar = self.bar(duration.as_millis() as u64, style, String::new());
        bar.set_prefix(label.to_string());
        Arc::new(Timed {
            bar,
            started: Instant::now(),
        })
    }

    fn finish(&self) {
        if let Some(bar) = self.current.lock().expect("progress lock").take() {
            bar.finish_and_clear();
        }
    }
}
