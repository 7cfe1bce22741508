//! Redis's partial quicksort (pqsort.c): SORT ... LIMIT and GEO ... COUNT sort only the part
//! of the results they return, and which of several equal elements lands where depends on the
//! exact sequence of swaps, so it is reproduced step by step.

/// Redis's partial quicksort (pqsort.c, the NetBSD Bentley-McIlroy qsort that skips partitions
/// lying wholly outside `lrange..=rrange`), over `v[a..a + n]`. Reproduced step by step because
/// which of several equal elements lands where depends on its exact sequence of swaps.
pub fn pqsort<T>(
    v: &mut [T],
    mut a: usize,
    mut n: usize,
    cmp: &dyn Fn(&T, &T) -> std::cmp::Ordering,
    lrange: usize,
    rrange: usize,
) {
    use std::cmp::Ordering::{Greater, Less};
    let c = |v: &[T], i: usize, j: usize| cmp(&v[i], &v[j]);
    let med3 = |v: &[T], x: usize, y: usize, z: usize| {
        if c(v, x, y) == Less {
            if c(v, y, z) == Less {
                y
            } else if c(v, x, z) == Less {
                z
            } else {
                x
            }
        } else if c(v, y, z) == Greater {
            y
        } else if c(v, x, z) == Less {
            x
        } else {
            z
        }
    };
    let vecswap = |v: &mut [T], i: usize, j: usize, k: usize| {
        for t in 0..k {
            v.swap(i + t, j + t);
        }
    };
    // Whether the partition [l, l + k) holds none of the wanted range.
    let outside = |l: usize, k: usize| {
        let r = l + k - 1;
        (lrange < l && rrange < l) || (lrange > r && rrange > r)
    };
    loop {
        if n < 7 {
            for m in a + 1..a + n {
                let mut l = m;
                while l > a && c(v, l - 1, l) == Greater {
                    v.swap(l, l - 1);
                    l -= 1;
                }
            }
            return;
        }
        let mut pm = a + n / 2;
        if n > 7 {
            let mut pl = a;
            let mut pn = a + n - 1;
            if n > 40 {
                let d = n / 8;
                pl = med3(v, pl, pl + d, pl + 2 * d);
                pm = med3(v, pm - d, pm, pm + d);
                pn = med3(v, pn - 2 * d, pn - d, pn);
            }
            pm = med3(v, pl, pm, pn);
        }
        v.swap(a, pm);
        let (mut pa, mut pb) = (a + 1, a + 1);
        let (mut pc, mut pd) = (a + n - 1, a + n - 1);
        loop {
            while pb <= pc {
                let r = c(v, pb, a);
                if r == Greater {
                    break;
                }
                if r == std::cmp::Ordering::Equal {
                    v.swap(pa, pb);
                    pa += 1;
                }
                pb += 1;
            }
            while pb <= pc {
                let r = c(v, pc, a);
                if r == Less {
                    break;
                }
                if r == std::cmp::Ordering::Equal {
                    v.swap(pc, pd);
                    pd -= 1;
                }
                pc -= 1;
            }
            if pb > pc {
                break;
            }
            v.swap(pb, pc);
            pb += 1;
            pc -= 1;
        }
        let pn = a + n;
        let r = (pa - a).min(pb - pa);
        vecswap(v, a, pb - r, r);
        let r = (pd - pc).min(pn - pd - 1);
        vecswap(v, pb, pn - r, r);
        let r = pb - pa;
        if r > 1 && !outside(a, r) {
            pqsort(v, a, r, cmp, lrange, rrange);
        }
        let r = pd - pc;
        if r > 1 {
            a = pn - r;
            n = r;
            if !outside(a, r) {
                continue;
            }
        }
        return;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pqsort_sorts_the_requested_range() {
        let mut rng = fastrand::Rng::with_seed(7);
        for n in 0..200usize {
            let v: Vec<u32> = (0..n).map(|_| rng.u32(0..20)).collect();
            let mut want = v.clone();
            want.sort();
            for _ in 0..4 {
                if n == 0 {
                    break;
                }
                let l = rng.usize(0..n);
                let r = rng.usize(l..n);
                let mut got = v.clone();
                pqsort(&mut got, 0, n, &|a: &u32, b: &u32| a.cmp(b), l, r);
                assert_eq!(&got[l..=r], &want[l..=r], "n={n} l={l} r={r}");
            }
        }
    }
}
