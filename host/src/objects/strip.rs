//! What the host drops from every object before it is cached: bookkeeping no plugin reads,
//! which dominates the size of small objects.

use kube::api::ObjectMeta;

/// The annotation `kubectl apply` (client-side) keeps a copy of the whole object in.
pub const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Drop `managedFields` and the [`LAST_APPLIED_ANNOTATION`] from an object's metadata (and
/// the annotation map when nothing else is left in it). Everything else is kept.
///
/// ```
/// use kube::api::ObjectMeta;
/// let mut meta = ObjectMeta {
///     annotations: Some([(wasmop::objects::LAST_APPLIED_ANNOTATION.to_owned(), "{}".to_owned())].into()),
///     managed_fields: Some(vec![Default::default()]),
///     ..Default::default()
/// };
/// wasmop::objects::strip(&mut meta);
/// assert_eq!((meta.annotations, meta.managed_fields), (None, None));
/// ```
pub fn strip(meta: &mut ObjectMeta) {
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(LAST_APPLIED_ANNOTATION);
        if annotations.is_empty() {
            meta.annotations = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_annotations_and_labels_are_kept() {
        let mut meta = ObjectMeta {
            name: Some("a".into()),
            labels: Some([("app".to_owned(), "x".to_owned())].into()),
            annotations: Some(
                [(LAST_APPLIED_ANNOTATION.to_owned(), "{}".to_owned()), ("note".to_owned(), "kept".to_owned())].into(),
            ),
            ..Default::default()
        };
        let before = meta.clone();
        strip(&mut meta);
        assert_eq!(meta.annotations, Some([("note".to_owned(), "kept".to_owned())].into()));
        assert_eq!((meta.name, meta.labels), (before.name, before.labels));
    }
}
