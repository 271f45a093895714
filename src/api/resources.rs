//! Logical resources: whole-number quantities, validated request lists and the
//! `kruntimes.io/capacity.<resource>` annotations that carry a Runtime Pod's capacity.
//!
//! Everything here is pure. Errors name the field or annotation and the offending value so
//! that they can be shown to users unchanged.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use thiserror::Error;

/// The built-in resource every Run requests unless told otherwise.
pub const RUNS: &str = "runs";
/// Prefix of the capacity annotations on Runtime Pods.
pub const CAPACITY_ANNOTATION_PREFIX: &str = "kruntimes.io/capacity.";
/// Runs capacity of a Runtime Pod that carries no `runs` annotation: the kruntimes project's
/// current default (its `RuntimeDefaultRunsCapacity`), which the spec says existing Runtime
/// Pods retain.
pub const DEFAULT_RUNS_CAPACITY: u64 = 2;

pub type Result<T, E = ResourceError> = std::result::Result<T, E>;

/// Why a resource name or quantity was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ResourceError {
    #[error("{field}: {value:?} is not a valid resource name: {why}")]
    InvalidName {
        field: String,
        value: String,
        why: &'static str,
    },
    #[error("{field}: {value:?} is not a valid quantity: {why}")]
    InvalidQuantity {
        field: String,
        value: String,
        why: QuantityError,
    },
}

impl ResourceError {
    /// The path of the refused field, e.g. `spec.resources.requests["example.com/gpu"]`.
    pub fn field(&self) -> &str {
        match self {
            ResourceError::InvalidName { field, .. }
            | ResourceError::InvalidQuantity { field, .. } => field,
        }
    }
}

/// Why a quantity string is not a whole number of logical units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum QuantityError {
    #[error("it is not Kubernetes quantity syntax (use a whole number such as \"1\" or \"4\")")]
    Syntax,
    #[error("it is negative; logical resources must be 0 or more")]
    Negative,
    #[error(
        "it is not a whole number; logical resources are counted in whole units (use \"1\" or \"2\")"
    )]
    Fractional,
    #[error("it is larger than 18446744073709551615")]
    Overflow,
}

/// A validated set of logical resources: name to whole amount, in name order.
///
/// Kept as a vector sorted by name: a set holds one to a few resources, for which a search of a
/// short vector is as fast as a map's and costs a fraction of its memory (a `BTreeMap`'s first
/// node is about 400 bytes; every Runtime Pod's capacity and every Run's request is one).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Resources(Vec<(Box<str>, u64)>);

impl Resources {
    pub fn new() -> Self {
        Self::default()
    }

    /// Where `name` is, or would be inserted.
    fn find(&self, name: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.as_ref().cmp(name))
    }

    /// Amount of `name`, 0 when absent.
    pub fn get(&self, name: &str) -> u64 {
        self.find(name).map_or(0, |i| self.0[i].1)
    }

    /// Whether `name` is present (a capacity of 0 is still advertised).
    pub fn contains(&self, name: &str) -> bool {
        self.find(name).is_ok()
    }

    /// Sets the amount of `name`, replacing what it had.
    pub fn insert(&mut self, name: impl Into<String>, amount: u64) {
        let name: String = name.into();
        match self.find(&name) {
            Ok(i) => self.0[i].1 = amount,
            Err(i) => self.0.insert(i, (name.into_boxed_str(), amount)),
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, u64)> {
        self.0.iter().map(|(k, v)| (k.as_ref(), *v))
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| k.as_ref())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Adds every amount of `other` (saturating: usage can never wrap).
    pub fn add(&mut self, other: &Resources) {
        for (name, amount) in other.iter() {
            // No key allocated for a resource already present (the common case).
            match self.find(name) {
                Ok(i) => self.0[i].1 = self.0[i].1.saturating_add(amount),
                Err(i) => self.0.insert(i, (name.into(), amount)),
            }
        }
    }

    /// Subtracts every amount of `other`, dropping entries that reach 0.
    pub fn sub(&mut self, other: &Resources) {
        for (name, amount) in other.iter() {
            if let Ok(i) = self.find(name) {
                let left = self.0[i].1.saturating_sub(amount);
                if left == 0 {
                    self.0.remove(i);
                } else {
                    self.0[i].1 = left;
                }
            }
        }
    }

    /// Resources of `request` that do not fit `capacity` on top of `used`, in name order
    /// (see [`Shortfall::check`], the one fit rule).
    pub fn shortfalls<'a>(
        request: &'a Resources,
        used: &'a Resources,
        capacity: &'a Resources,
    ) -> impl Iterator<Item = Shortfall> + 'a {
        request.iter().filter_map(move |(name, amount)| {
            let advertised = capacity.contains(name).then(|| capacity.get(name));
            Shortfall::check(name, amount, used.get(name), advertised)
        })
    }

    /// Whether the complete `request` fits `capacity` on top of `used`.
    pub fn fits(request: &Resources, used: &Resources, capacity: &Resources) -> bool {
        Self::shortfalls(request, used, capacity).next().is_none()
    }
}

/// One requested resource that does not fit a Runtime Pod, with the numbers that decided it,
/// as kube-scheduler's `InsufficientResource` carries requested, used and capacity.
///
/// [`Shortfall::check`] is the one capacity-fit rule of the crate: the scheduler's filter,
/// Reserve and runtimed's admission all decide through it, and `explain` shows what it
/// returned. Built only on the rejection path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Shortfall {
    pub resource: Arc<str>,
    pub requested: u64,
    /// In use before the request (actual plus assumed); `u64::MAX` when unknown.
    pub used: u64,
    /// `None` when the Pod does not advertise the resource at all.
    pub capacity: Option<u64>,
}

impl Shortfall {
    /// Whether `requested` fits on top of `used`: `used + requested <= capacity`. A resource
    /// that is not advertised (`capacity` is `None`) never fits, and neither does anything
    /// against a capacity of 0, not even a request of 0: `runs: "0"` closes a Pod to every
    /// Run, including one that asks for `runs: "0"`.
    pub fn fits(requested: u64, used: u64, capacity: Option<u64>) -> bool {
        capacity.is_some_and(|capacity| {
            capacity > 0
                && used
                    .checked_add(requested)
                    .is_some_and(|total| total <= capacity)
        })
    }

    /// The shortfall of `resource`, or `None` when the request fits (see [`Shortfall::fits`]).
    pub fn check(
        resource: impl Into<Arc<str>>,
        requested: u64,
        used: u64,
        capacity: Option<u64>,
    ) -> Option<Shortfall> {
        (!Self::fits(requested, used, capacity)).then(|| Shortfall {
            resource: resource.into(),
            requested,
            used,
            capacity,
        })
    }

    /// How much would have to be released for the request to fit; `None` when releasing
    /// cannot help (not advertised, usage unknown, or a request above the capacity).
    pub fn to_release(&self) -> Option<u64> {
        let capacity = self.capacity?;
        if capacity == 0 || self.used == u64::MAX || self.requested > capacity {
            return None;
        }
        // In u128 so a sum beyond u64 still gives the exact amount.
        let need = u128::from(self.used) + u128::from(self.requested) - u128::from(capacity);
        Some(u64::try_from(need).unwrap_or(u64::MAX))
    }
}

impl fmt::Display for Shortfall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.capacity {
            Some(cap) => write!(
                f,
                "insufficient {}: requested {}, {} of {} in use",
                self.resource, self.requested, self.used, cap
            ),
            None => write!(f, "the Pod does not advertise {}", self.resource),
        }
    }
}

/// A later amount of a name replaces an earlier one, as a map's `collect` does.
impl<S: Into<String>> FromIterator<(S, u64)> for Resources {
    fn from_iter<I: IntoIterator<Item = (S, u64)>>(iter: I) -> Self {
        let mut resources = Resources::new();
        for (name, amount) in iter {
            resources.insert(name, amount);
        }
        resources
    }
}

impl fmt::Display for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        f.write_str("{")?;
        for (name, amount) in self.iter() {
            if !first {
                f.write_str(", ")?;
            }
            first = false;
            write!(f, "{name}: {amount}")?;
        }
        f.write_str("}")
    }
}

/// Parses a Kubernetes quantity whose value must be a whole number ≥ 0.
///
/// `"2"`, `"2000m"`, `"1k"`, `"1Ki"` and `"1e3"` are accepted; `"1.5"`, `"500m"`, `"-1"`,
/// `"abc"` and anything above `u64::MAX` are not.
pub fn parse_whole_quantity(s: &str) -> Result<u64, QuantityError> {
    let bytes = s.as_bytes();
    let mut i = 0;
    let mut negative = false;
    if let Some(&c) = bytes.first()
        && (c == b'+' || c == b'-')
    {
        negative = c == b'-';
        i = 1;
    }
    let int_start = i;
    while i < bytes.len() && bytes[i].is_ascii_digit() {
        i += 1;
    }
    let int_digits = &s[int_start..i];
    let mut frac_digits = "";
    if i < bytes.len() && bytes[i] == b'.' {
        let frac_start = i + 1;
        i = frac_start;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        frac_digits = &s[frac_start..i];
    }
    if int_digits.is_empty() && frac_digits.is_empty() {
        return Err(QuantityError::Syntax);
    }
    let (dec_exp, bin_exp) = parse_suffix(&s[i..]).ok_or(QuantityError::Syntax)?;

    // Significant digits and the power of ten that scales them.
    let mut digits: Vec<u8> = int_digits.bytes().chain(frac_digits.bytes()).collect();
    let mut exp10 = dec_exp - frac_digits.len() as i64;
    while exp10 < 0 && digits.last() == Some(&b'0') {
        digits.pop();
        exp10 += 1;
    }
    let first_nonzero = digits.iter().position(|&d| d != b'0');
    let Some(first_nonzero) = first_nonzero else {
        return Ok(0);
    };
    if negative {
        return Err(QuantityError::Negative);
    }
    if exp10 < 0 {
        return Err(QuantityError::Fractional);
    }
    let digits = &digits[first_nonzero..];
    if digits.len() as i64 + exp10 > 20 {
        return Err(QuantityError::Overflow);
    }
    let mut value: u128 = 0;
    for &d in digits {
        value = value * 10 + u128::from(d - b'0');
    }
    for _ in 0..exp10 {
        value = value.checked_mul(10).ok_or(QuantityError::Overflow)?;
    }
    for _ in 0..bin_exp {
        value = value.checked_mul(2).ok_or(QuantityError::Overflow)?;
        if value > u128::from(u64::MAX) {
            return Err(QuantityError::Overflow);
        }
    }
    u64::try_from(value).map_err(|_| QuantityError::Overflow)
}

/// Decimal and binary exponents of a quantity suffix, `None` when it is not one.
fn parse_suffix(suffix: &str) -> Option<(i64, u32)> {
    let known = match suffix {
        "" => Some((0, 0)),
        "n" => Some((-9, 0)),
        "u" => Some((-6, 0)),
        "m" => Some((-3, 0)),
        "k" => Some((3, 0)),
        "M" => Some((6, 0)),
        "G" => Some((9, 0)),
        "T" => Some((12, 0)),
        "P" => Some((15, 0)),
        "E" => Some((18, 0)),
        "Ki" => Some((0, 10)),
        "Mi" => Some((0, 20)),
        "Gi" => Some((0, 30)),
        "Ti" => Some((0, 40)),
        "Pi" => Some((0, 50)),
        "Ei" => Some((0, 60)),
        _ => None,
    };
    if known.is_some() {
        return known;
    }
    let exponent = suffix.strip_prefix(['e', 'E'])?;
    let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
    if digits.is_empty() || digits.len() > 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    exponent.parse::<i64>().ok().map(|e| (e, 0))
}

/// Checks a resource name against Kubernetes' qualified-name rules: an optional DNS subdomain
/// prefix and `/`, then a name of at most 63 alphanumerics, `-`, `_` or `.`.
pub fn validate_resource_name(name: &str) -> Result<(), &'static str> {
    let (prefix, local) = match name.split_once('/') {
        Some((prefix, local)) => (Some(prefix), local),
        None => (None, name),
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() || prefix.len() > 253 {
            return Err("the prefix before '/' must be a DNS subdomain of 1 to 253 characters");
        }
        let label_ok = |l: &str| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        };
        if !prefix.split('.').all(label_ok) {
            return Err(
                "the prefix before '/' must be a lowercase DNS subdomain such as example.com",
            );
        }
    }
    if local.is_empty() || local.len() > 63 {
        return Err("the name must be 1 to 63 characters");
    }
    let ok_inner = local
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    let ok_ends = local.as_bytes()[0].is_ascii_alphanumeric()
        && local.as_bytes()[local.len() - 1].is_ascii_alphanumeric();
    if !ok_inner || !ok_ends {
        return Err(
            "the name must consist of alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric",
        );
    }
    Ok(())
}

/// Parses one named quantity, naming `field` in any error.
fn parse_entry(field: impl Fn() -> String, name: &str, value: &str) -> Result<u64> {
    validate_resource_name(name).map_err(|why| ResourceError::InvalidName {
        field: field(),
        value: name.to_string(),
        why,
    })?;
    parse_whole_quantity(value).map_err(|why| ResourceError::InvalidQuantity {
        field: field(),
        value: value.to_string(),
        why,
    })
}

impl super::Run {
    /// The Run's complete request ([`parse_requests`] of `spec.resources.requests`): what
    /// runtimed reserves and claims. The scheduler parses each Run once, when it queues it.
    pub fn request(&self) -> Result<Resources> {
        parse_requests(self.spec.resources.as_ref().map(|r| &r.requests))
    }
}

impl super::Run {
    /// The Run's request as usage counts it once the Run is active, even when it cannot be
    /// validated (created before validation existed, or assigned by something else): the
    /// readable amounts (zero dropped, `runs` defaulting to 1), and the names whose quantity
    /// cannot be read, which the scheduler counts as unknown usage.
    pub fn counted_request(&self) -> (Resources, Vec<String>) {
        let requests = self.spec.resources.as_ref().map(|r| &r.requests);
        if let Ok(amounts) = parse_requests(requests) {
            return (amounts, Vec::new());
        }
        let (mut amounts, mut unknown) = (Resources::new(), Vec::new());
        let mut saw_runs = false;
        for (name, quantity) in requests.into_iter().flatten() {
            saw_runs |= name == RUNS;
            match parse_whole_quantity(&quantity.0) {
                Ok(0) => {}
                Ok(amount) => amounts.insert(name.clone(), amount),
                Err(_) => unknown.push(name.clone()),
            }
        }
        if !saw_runs {
            amounts.insert(RUNS, 1);
        }
        (amounts, unknown)
    }
}

/// Validates a Run's `spec.resources.requests` into the complete request: zero amounts are
/// dropped and `runs` defaults to 1 when it is not requested. An explicit `runs: "0"` is kept
/// as 0: it uses no slot, but a Pod that advertises `runs: "0"` still takes no Run (see
/// [`Shortfall::fits`]).
pub fn parse_requests(requests: Option<&BTreeMap<String, Quantity>>) -> Result<Resources> {
    let mut out = Resources::new();
    let mut saw_runs = false;
    for (name, quantity) in requests.into_iter().flatten() {
        let amount = parse_entry(
            || format!("spec.resources.requests[{name:?}]"),
            name,
            &quantity.0,
        )?;
        saw_runs |= name == RUNS;
        if amount > 0 || name == RUNS {
            out.insert(name.clone(), amount);
        }
    }
    if !saw_runs {
        out.insert(RUNS, 1);
    }
    Ok(out)
}

/// Validates a Runtime's `spec.capacity.resources`, including that every name can be carried
/// by a capacity annotation. Zero capacities are kept: they advertise the resource with
/// nothing to give.
pub fn parse_capacity_spec(resources: &BTreeMap<String, Quantity>) -> Result<Resources> {
    let mut out = Resources::new();
    for (name, quantity) in resources {
        let field = || format!("spec.capacity.resources[{name:?}]");
        let amount = parse_entry(field, name, &quantity.0)?;
        capacity_annotation(name).map_err(|why| ResourceError::InvalidName {
            field: field(),
            value: name.clone(),
            why,
        })?;
        out.insert(name.clone(), amount);
    }
    Ok(out)
}

/// The annotation key that carries the capacity of `resource`.
///
/// Unprefixed names keep the designed form, `kruntimes.io/capacity.runs`. A prefixed name
/// such as `example.com/gpu` cannot be written as `kruntimes.io/capacity.example.com/gpu`:
/// Kubernetes refuses annotation keys with a second `/`. Its `/` is therefore written as `_`
/// (`kruntimes.io/capacity.example.com_gpu`), which is unambiguous because a DNS prefix never
/// contains `_`; for the same reason an unprefixed name containing `_` cannot be advertised.
pub fn capacity_annotation(resource: &str) -> Result<String, &'static str> {
    validate_resource_name(resource)?;
    let encoded = match resource.split_once('/') {
        Some((prefix, name)) => format!("{prefix}_{name}"),
        None if resource.contains('_') => {
            return Err(
                "an unprefixed name containing '_' cannot be projected to a capacity annotation; use a prefixed name such as example.com/<name>",
            );
        }
        None => resource.to_string(),
    };
    let key = format!("{CAPACITY_ANNOTATION_PREFIX}{encoded}");
    // The part after `kruntimes.io/` is a Kubernetes name of at most 63 characters.
    if key.len() - "kruntimes.io/".len() > 63 {
        return Err(
            "it is too long for a capacity annotation (capacity.<name> may have at most 63 characters)",
        );
    }
    Ok(key)
}

/// The resource whose capacity an annotation key carries (the inverse of
/// [`capacity_annotation`]), `None` for other annotations.
///
/// The upstream form of a prefixed name, `kruntimes.io/capacity.example.com/gpu`, cannot exist
/// on a Kubernetes object, but it is read as `example.com/gpu` should it ever appear.
pub fn resource_of_annotation(key: &str) -> Option<String> {
    let encoded = key.strip_prefix(CAPACITY_ANNOTATION_PREFIX)?;
    Some(match encoded.split_once('_') {
        Some((prefix, name)) => format!("{prefix}/{name}"),
        None => encoded.to_string(),
    })
}

/// Reads a Pod's complete capacity from its `kruntimes.io/capacity.<resource>` annotations.
/// A Pod without a `runs` annotation has [`DEFAULT_RUNS_CAPACITY`]; no other resource has an
/// implicit capacity.
pub fn parse_capacity_annotations<'a>(
    annotations: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> Result<Resources> {
    let mut out = Resources::new();
    for (key, value) in annotations {
        let Some(name) = resource_of_annotation(key) else {
            continue;
        };
        let amount = parse_entry(|| format!("annotation {key}"), &name, value)?;
        out.insert(name, amount);
    }
    if !out.contains(RUNS) {
        out.insert(RUNS, DEFAULT_RUNS_CAPACITY);
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
