//! YAML as the host reads and writes it (policy files, object files, CRDs, configuration, the
//! manifests it prints): serde-saphyr with the YAML 1.2 core schema, as Kubernetes objects are
//! meant — only `true` and `false` are booleans (`on`, `yes`, `y` are strings), a leading zero
//! does not make a number octal, and errors are one line (no source snippet).

use serde::Serialize;
use serde::de::DeserializeOwned;

/// A YAML text that cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum YamlError {
    /// The text is not YAML, or not of the shape asked for; the message names the line and column.
    #[error("{}", .0.without_snippet())]
    Read(serde_saphyr::Error),
    /// A value that has no YAML form.
    #[error(transparent)]
    Write(#[from] serde_saphyr::SerializeError),
}

fn options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        strict_booleans: true,
        leading_zero_numbers_as_strings: true,
        underscored_numbers_as_strings: true,
        with_snippet: false,
    }
}

/// One YAML document (JSON is YAML too) as a `T`.
///
/// # Errors
/// [`YamlError::Read`]: more than one document, not YAML, or not a `T`.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, YamlError> {
    serde_saphyr::from_str_with_options(text, options()).map_err(YamlError::Read)
}

/// [`from_str`] of UTF-8 bytes.
///
/// # Errors
/// As [`from_str`], and bytes that are not UTF-8.
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, YamlError> {
    serde_saphyr::from_slice_with_options(bytes, options()).map_err(YamlError::Read)
}

/// Every document of a multi-document stream (`---` separated), each as a `T`, in order; empty
/// and null documents are skipped. After a document that is not a `T` the next ones are still
/// read; after one that is not YAML the stream ends with that error.
pub fn documents<T: DeserializeOwned>(text: &str) -> Vec<Result<T, YamlError>> {
    let mut options = options();
    if let Some(budget) = options.budget.as_mut() {
        // The whole text is in memory already: only the parse budgets apply.
        budget.max_reader_input_bytes = None;
    }
    let mut reader = text.as_bytes();
    serde_saphyr::read_with_options(&mut reader, options).map(|document| document.map_err(YamlError::Read)).collect()
}

/// `value` as one YAML document; strings that a YAML 1.1 reader (kubectl, helm) would take for
/// another type are quoted.
///
/// # Errors
/// [`YamlError::Write`]: a value without a YAML form (a map with non-string keys, ...).
pub fn to_string<T: Serialize>(value: &T) -> Result<String, YamlError> {
    Ok(serde_saphyr::to_string(value)?)
}
