//! Gates that hold a Run's task until the test opens them, so a Run is still running when the
//! test acts on it however slowly the test gets there: a wait on a condition, not on the
//! length of a `sleep`. A gate is a file in a directory of the test's own; the task polls for
//! it. Owns the files and the shell snippets only: it starts nothing.

use std::path::PathBuf;

/// The gates of one test, in `<tmp>/<namespace>-gates`. Dropping it removes the directory,
/// which also lets every task still held end, so none outlives the test.
pub struct Gates {
    dir: PathBuf,
}

impl Gates {
    /// The gates of the test that owns namespace `ns`.
    pub fn new(ns: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("{ns}-gates"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Gates { dir }
    }

    /// A shell script that waits until the gate `name` or `all` is open (or the gates are
    /// gone), then exits 0.
    pub fn hold(&self, name: &str) -> String {
        let dir = self.dir.display();
        format!(
            "while [ -d {dir} ] && [ ! -e {dir}/{name} ] && [ ! -e {dir}/all ]; do sleep 0.05; done"
        )
    }

    /// Like [`Self::hold`], for the first attempt only: an attempt after the first (a
    /// preempted Run running again) ends at once.
    pub fn hold_first_attempt(&self, name: &str) -> String {
        let dir = self.dir.display();
        let hold = self.hold(name);
        format!("[ -e {dir}/{name}.ran ] && exit 0; touch {dir}/{name}.ran; {hold}")
    }

    /// Waits until the first attempt of `name` (held by [`Self::hold_first_attempt`]) has
    /// started its task. A Run's phase says Running once runtimed claimed it, which is before
    /// its process is at the gate: a test that freezes or kills runtimed waits for this.
    pub async fn reached_first_attempt(&self, name: &str) {
        let ran = self.dir.join(format!("{name}.ran"));
        let what = format!("the first attempt of {name} to reach its gate");
        super::world::eventually(
            std::time::Duration::from_secs(60),
            &what,
            async || match ran.exists() {
                true => Ok(()),
                false => Err(format!("{} does not exist", ran.display())),
            },
        )
        .await;
    }

    /// Opens the gate `name` (a Run's, or `all`).
    pub fn open(&self, name: &str) {
        std::fs::write(self.dir.join(name), "").unwrap();
    }
}

impl Drop for Gates {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
