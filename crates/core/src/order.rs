//! Small in-place sorts. The standard library's sorts bring their whole machinery (quicksort,
//! drift sort, small-sort networks: about 4 KB of wasm) for each element type; these are an
//! insertion sort of a few dozen bytes per use, for the short lists this code sorts (a
//! conversation's window, a message's people, a Mini App's fields), and a top-n pick for the
//! one long list (memory candidates). Both are stable. Maps are built by inserting, for the
//! same reason (`map_of`).

/// Sorts `v` so that no element comes after one it is `less` than, stably. Quadratic in the
/// worst case: for short or nearly sorted lists.
pub fn sort_by<T>(v: &mut [T], mut less: impl FnMut(&T, &T) -> bool) {
    for i in 1..v.len() {
        let mut j = i;
        while j > 0 && less(&v[j], &v[j - 1]) {
            v.swap(j, j - 1);
            j -= 1;
        }
    }
}

/// Sorts `v` by `key`, stably (see [`sort_by`]).
pub fn sort_by_key<T, K: Ord>(v: &mut [T], mut key: impl FnMut(&T) -> K) {
    sort_by(v, |a, b| key(a) < key(b))
}

/// Sorts `v` ascending (stable; see [`sort_by_key`]).
pub fn sort<T: Ord>(v: &mut [T]) {
    sort_by(v, |a, b| a < b)
}

/// A map of `pairs`, a later pair replacing an earlier one with the same key (what `collect`
/// does, without the sort `BTreeMap`'s `FromIterator` brings for each iterator type).
pub fn map_of<K: Ord, V>(pairs: impl IntoIterator<Item = (K, V)>) -> std::collections::BTreeMap<K, V> {
    let mut map = std::collections::BTreeMap::new();
    for (k, v) in pairs {
        map.insert(k, v);
    }
    map
}

/// The `n` best of `items` by `score`, best first; ties keep the order of `items`. Linear in
/// `items` times `n`.
pub fn top_n<T>(items: impl IntoIterator<Item = (f32, T)>, n: usize) -> Vec<T> {
    let mut best: Vec<(f32, T)> = Vec::with_capacity(n + 1);
    for (score, item) in items {
        let at = best.iter().position(|(s, _)| score > *s).unwrap_or(best.len());
        if at < n {
            best.insert(at, (score, item));
            best.truncate(n);
        }
    }
    best.into_iter().map(|(_, t)| t).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn sorts_as_the_standard_stable_sort(v in proptest::collection::vec((0u8..8, any::<u16>()), 0..60)) {
            let mut ours = v.clone();
            sort_by_key(&mut ours, |p| p.0);
            let mut std = v.clone();
            std.sort_by_key(|p| p.0);
            prop_assert_eq!(ours, std);
        }

        #[test]
        fn top_n_is_the_stable_sort_cut(v in proptest::collection::vec((0u8..6, any::<u16>()), 0..60), n in 0usize..10) {
            let ours = top_n(v.iter().map(|(s, id)| (*s as f32, *id)), n);
            let mut std = v.clone();
            std.sort_by(|a, b| b.0.cmp(&a.0));
            let want: Vec<u16> = std.into_iter().take(n).map(|p| p.1).collect();
            prop_assert_eq!(ours, want);
        }
    }

    #[test]
    fn map_of_keeps_the_last_value_of_a_key() {
        let m = map_of([("a", 1), ("b", 2), ("a", 3)]);
        assert_eq!(m, [("a", 3), ("b", 2)].into_iter().collect());
    }

    #[test]
    fn sort_orders_plain_values() {
        let mut v = vec![3, 1, 2, 1];
        sort(&mut v);
        assert_eq!(v, [1, 1, 2, 3]);
    }
}
