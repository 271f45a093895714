use super::*;
use proptest::prelude::*;

fn q(s: &str) -> Quantity {
    Quantity(s.to_string())
}

#[test]
fn whole_quantities_parse_to_their_value() {
    for (input, want) in [
        ("0", 0),
        ("2", 2),
        ("+3", 3),
        ("2000m", 2),
        ("1k", 1000),
        ("1Ki", 1024),
        ("2Mi", 2 << 20),
        ("1e3", 1000),
        ("1E2", 100),
        ("1.0", 1),
        ("1.5k", 1500),
        ("3000000000n", 3),
        ("-0", 0),
        ("18446744073709551615", u64::MAX),
        ("15Ei", 15u64 << 60),
    ] {
        assert_eq!(parse_whole_quantity(input), Ok(want), "{input}");
    }
}

#[test]
fn non_whole_or_malformed_quantities_are_refused_with_the_reason() {
    for (input, want) in [
        ("1.5", QuantityError::Fractional),
        ("500m", QuantityError::Fractional),
        ("1e-1", QuantityError::Fractional),
        ("-1", QuantityError::Negative),
        ("abc", QuantityError::Syntax),
        ("", QuantityError::Syntax),
        ("1 ", QuantityError::Syntax),
        ("1Kb", QuantityError::Syntax),
        (".", QuantityError::Syntax),
        ("18446744073709551616", QuantityError::Overflow),
        ("16Ei", QuantityError::Overflow),
        ("1e30", QuantityError::Overflow),
    ] {
        assert_eq!(parse_whole_quantity(input), Err(want), "{input}");
    }
}

#[test]
fn requests_default_to_one_run_and_drop_zero_amounts() {
    let none = parse_requests(None).unwrap();
    assert_eq!(none, Resources::from_iter([(RUNS, 1)]));

    let reqs = BTreeMap::from([
        ("example.com/gpu".to_string(), q("1")),
        ("example.com/fpga".to_string(), q("0")),
    ]);
    let parsed = parse_requests(Some(&reqs)).unwrap();
    assert_eq!(
        parsed,
        Resources::from_iter([("example.com/gpu", 1), (RUNS, 1)])
    );

    let zero_runs = BTreeMap::from([(RUNS.to_string(), q("0"))]);
    assert_eq!(
        parse_requests(Some(&zero_runs)).unwrap(),
        Resources::from_iter([(RUNS, 0)]),
        "an explicit runs: 0 is kept, so a Pod with runs: 0 can refuse it"
    );
}

#[test]
fn request_errors_name_the_field_and_value() {
    let reqs = BTreeMap::from([("example.com/gpu".to_string(), q("1.5"))]);
    let err = parse_requests(Some(&reqs)).unwrap_err().to_string();
    assert_eq!(
        err,
        "spec.resources.requests[\"example.com/gpu\"]: \"1.5\" is not a valid quantity: it is not a whole number; logical resources are counted in whole units (use \"1\" or \"2\")"
    );
    let bad_name = BTreeMap::from([("Bad Name!".to_string(), q("1"))]);
    let err = parse_requests(Some(&bad_name)).unwrap_err().to_string();
    assert!(
        err.contains("\"Bad Name!\" is not a valid resource name"),
        "{err}"
    );
}

#[test]
fn resource_names_follow_kubernetes_rules() {
    for ok in ["runs", "example.com/gpu", "a.b-c/x_y.z", "A1"] {
        assert_eq!(validate_resource_name(ok), Ok(()), "{ok}");
    }
    for bad in [
        "",
        "/gpu",
        "Example.com/gpu",
        "gpu/",
        "-x",
        "x-",
        "a b",
        &"x".repeat(64),
    ] {
        assert!(validate_resource_name(bad).is_err(), "{bad}");
    }
}

#[test]
fn capacity_annotation_keys_round_trip_and_are_valid_kubernetes_keys() {
    for (resource, key) in [
        ("runs", "kruntimes.io/capacity.runs"),
        ("example.com/gpu", "kruntimes.io/capacity.example.com_gpu"),
        ("example.com/a_b", "kruntimes.io/capacity.example.com_a_b"),
    ] {
        assert_eq!(capacity_annotation(resource).as_deref(), Ok(key));
        assert_eq!(resource_of_annotation(key).as_deref(), Some(resource));
        // An annotation key is itself a qualified name: one '/', a name of <= 63 chars.
        assert_eq!(validate_resource_name(key), Ok(()), "{key}");
    }
    assert!(capacity_annotation("my_res").is_err());
    assert!(capacity_annotation(&format!("example.com/{}", "x".repeat(50))).is_err());
    assert_eq!(resource_of_annotation("other/key"), None);
    // The upstream project's form for a prefixed name, should it ever appear.
    assert_eq!(
        resource_of_annotation("kruntimes.io/capacity.example.com/gpu").as_deref(),
        Some("example.com/gpu")
    );
}

#[test]
fn capacity_spec_refuses_names_no_annotation_can_carry() {
    let spec = BTreeMap::from([("my_res".to_string(), q("1"))]);
    let err = parse_capacity_spec(&spec).unwrap_err().to_string();
    assert!(
        err.starts_with(
            "spec.capacity.resources[\"my_res\"]: \"my_res\" is not a valid resource name"
        ),
        "{err}"
    );
}

#[test]
fn capacity_annotations_default_runs_and_name_the_bad_annotation() {
    let ann = BTreeMap::from([
        (
            "kruntimes.io/capacity.example.com_gpu".to_string(),
            "2".to_string(),
        ),
        ("other".to_string(), "x".to_string()),
    ]);
    let cap = parse_capacity_annotations(&ann).unwrap();
    assert_eq!(
        cap,
        Resources::from_iter([("example.com/gpu", 2), (RUNS, DEFAULT_RUNS_CAPACITY)])
    );

    assert_eq!(DEFAULT_RUNS_CAPACITY, 2, "the upstream project's default");
    let ann = BTreeMap::from([("kruntimes.io/capacity.runs".to_string(), "4".to_string())]);
    assert_eq!(parse_capacity_annotations(&ann).unwrap().get(RUNS), 4);

    let bad = BTreeMap::from([("kruntimes.io/capacity.runs".to_string(), "two".to_string())]);
    let err = parse_capacity_annotations(&bad).unwrap_err().to_string();
    assert!(
        err.starts_with("annotation kruntimes.io/capacity.runs: \"two\""),
        "{err}"
    );
}

#[test]
fn a_set_keeps_one_amount_per_name_in_name_order() {
    let mut set: Resources = [("runs", 1), ("example.com/gpu", 2), ("runs", 4)]
        .into_iter()
        .collect();
    assert_eq!(
        set.iter().collect::<Vec<_>>(),
        [("example.com/gpu", 2), ("runs", 4)],
        "name order, the later amount of a name"
    );
    set.insert("memory", 3);
    set.add(&[("runs", 1), ("cpu", 5)].into_iter().collect());
    assert_eq!(
        set.to_string(),
        "{cpu: 5, example.com/gpu: 2, memory: 3, runs: 5}"
    );
    set.sub(
        &[("runs", 5), ("cpu", 9), ("absent", 1)]
            .into_iter()
            .collect(),
    );
    assert_eq!(
        set.to_string(),
        "{example.com/gpu: 2, memory: 3}",
        "zero dropped"
    );
    assert!(set.contains("memory") && !set.contains("runs"));
    assert_eq!((set.get("example.com/gpu"), set.get("runs")), (2, 0));
}

#[test]
fn fits_needs_every_requested_resource_advertised_with_room() {
    let cap = Resources::from_iter([(RUNS, 4), ("example.com/gpu", 1)]);
    let used = Resources::from_iter([(RUNS, 3)]);
    let req = Resources::from_iter([(RUNS, 1), ("example.com/gpu", 1)]);
    assert!(Resources::fits(&req, &used, &cap));
    let used = Resources::from_iter([(RUNS, 3), ("example.com/gpu", 1)]);
    assert_eq!(
        Resources::shortfalls(&req, &used, &cap).collect::<Vec<_>>(),
        [Shortfall {
            resource: "example.com/gpu".into(),
            requested: 1,
            used: 1,
            capacity: Some(1)
        }]
    );
    let req = Resources::from_iter([("example.com/tpu", 1)]);
    assert!(!Resources::fits(&req, &Resources::new(), &cap));
}

#[test]
fn a_shortfall_says_how_much_must_be_released_when_releasing_can_help() {
    let table = [
        (1, 3, Some(4), None, "fits"),
        (2, 3, Some(4), Some(1), "one must go"),
        (2, 4, Some(4), Some(2), "full"),
        (5, 0, Some(4), None, "larger than the Pod"),
        (1, 0, None, None, "not advertised"),
        (1, u64::MAX, Some(4), None, "usage unknown"),
        (u64::MAX, 1, Some(u64::MAX), Some(1), "no overflow"),
        (
            0,
            0,
            Some(0),
            None,
            "a zero capacity takes nothing, not even 0",
        ),
        (1, 0, Some(0), None, "nothing to release on a closed Pod"),
    ];
    for (requested, used, capacity, release, case) in table {
        let shortfall = Shortfall::check("r", requested, used, capacity);
        assert_eq!(
            shortfall.is_none(),
            case == "fits",
            "{case}: only a fitting request has no shortfall"
        );
        assert_eq!(shortfall.and_then(|s| s.to_release()), release, "{case}");
    }
}

proptest! {
    #[test]
    fn every_u64_round_trips_through_plain_and_milli_syntax(v in any::<u64>()) {
        prop_assert_eq!(parse_whole_quantity(&v.to_string()), Ok(v));
        prop_assert_eq!(parse_whole_quantity(&format!("{v}000m")), Ok(v));
    }

    #[test]
    fn a_fraction_that_is_not_whole_is_refused(whole in 0u64..1_000_000, frac in 1u32..1000) {
        let s = format!("{whole}.{frac:03}");
        let frac_nonzero = frac % 1000 != 0;
        prop_assume!(frac_nonzero);
        prop_assert_eq!(parse_whole_quantity(&s), Err(QuantityError::Fractional));
    }

    #[test]
    fn parsing_never_panics(s in "\\PC{0,24}") {
        let _ = parse_whole_quantity(&s);
    }

    #[test]
    fn add_then_sub_restores_the_original(a in proptest::collection::btree_map("[a-c]", 1u64..1000, 0..3),
                                          b in proptest::collection::btree_map("[a-c]", 1u64..1000, 0..3)) {
        let a: Resources = a.into_iter().collect();
        let b: Resources = b.into_iter().collect();
        let mut x = a.clone();
        x.add(&b);
        x.sub(&b);
        prop_assert_eq!(x, a);
    }
}
