//! What `status -A` and `explain run/NAME` take to read and answer at a size: N Pending Runs of
//! one Runtime in one namespace (no scheduler, one Runtime Pod), each `kubectl-kruntimes`
//! binary given, pair by pair (every other round in reverse order), on one control plane.
//!
//! A measurement, not a test. Run:
//! `cargo bench --bench reading -- [--runs 50000] [--rounds 3] [--kruntimes LABEL=PATH]...`
//! (without `--kruntimes`, the binary this bench was built with, as `self`). Compare the
//! binaries of one run, as ratios: the machine is shared and noisy.

use testkit as support;

use std::time::Instant;

use kruntimes::testing::{pod, run};
use support::world::{Create as _, TestNs, create_many};

struct Options {
    runs: usize,
    rounds: usize,
    binaries: Vec<(String, String)>,
}

fn options() -> Options {
    let mut options = Options {
        runs: 50_000,
        rounds: 3,
        binaries: Vec::new(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |flag: &str| {
            args.next()
                .unwrap_or_else(|| panic!("{flag} needs a value"))
        };
        match arg.as_str() {
            "--runs" => options.runs = value("--runs").parse().expect("--runs N"),
            "--rounds" => options.rounds = value("--rounds").parse().expect("--rounds N"),
            "--kruntimes" => {
                let given = value("--kruntimes");
                let (label, path) = given
                    .split_once('=')
                    .unwrap_or_else(|| panic!("--kruntimes LABEL=PATH, not {given:?}"));
                options.binaries.push((label.into(), path.into()));
            }
            // cargo bench passes `--bench`.
            _ => {}
        }
    }
    if options.binaries.is_empty() {
        options
            .binaries
            .push(("self".into(), support::binary().to_string()));
    }
    options
}

#[tokio::main]
async fn main() {
    let options = options();
    let ns = TestNs::new("reading").await;
    pod("py-a").capacity(&[("runs", 4)]).create(&ns).await;
    let started = Instant::now();
    let runs = (0..options.runs).map(|i| run(&format!("r-{i:06}")));
    create_many(&ns, runs, 64).await;
    println!(
        "{} Runs created in {:.1}s",
        options.runs,
        started.elapsed().as_secs_f64()
    );
    let kubeconfig = &support::control_plane().kubeconfig;
    let commands: [(&str, Vec<&str>); 2] = [
        ("status -A", vec!["status", "-A", "-o", "json"]),
        (
            "explain",
            vec!["explain", "run/r-000000", "-n", &ns.name, "-o", "json"],
        ),
    ];
    let mut taken: Vec<Vec<Vec<f64>>> =
        vec![vec![Vec::new(); commands.len()]; options.binaries.len()];
    for round in 0..options.rounds {
        let mut order: Vec<usize> = (0..options.binaries.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for b in order {
            let (label, path) = &options.binaries[b];
            for (c, (name, args)) in commands.iter().enumerate() {
                let t = Instant::now();
                let out = std::process::Command::new(path)
                    .env("KUBECONFIG", kubeconfig)
                    .args(args)
                    .output()
                    .expect("run kubectl-kruntimes");
                let seconds = t.elapsed().as_secs_f64();
                assert!(
                    out.status.success(),
                    "{label} {name}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                println!("round {round} {label:>8} {name:<10} {seconds:.3}s");
                taken[b][c].push(seconds);
            }
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    for (c, (name, _)) in commands.iter().enumerate() {
        let base = mean(&taken[0][c]);
        for (b, (label, _)) in options.binaries.iter().enumerate() {
            let m = mean(&taken[b][c]);
            println!(
                "{name:<10} {label:>8}: mean {m:.3}s, {:.2}× {}",
                m / base,
                options.binaries[0].0
            );
        }
    }
}
