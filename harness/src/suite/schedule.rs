//! Runs a suite's jobs on `-j` threads: shared jobs whenever a thread is free, exclusive jobs
//! one at a time per device (a shared job may run next to an exclusive one). Jobs start in
//! list order, except that a thread skips an exclusive job whose device is busy and takes the
//! next one it may run.

use std::collections::{BTreeSet, VecDeque};
use std::sync::{Condvar, Mutex, PoisonError};

/// What the scheduler needs to know of a job: the device it holds while it runs, if any.
pub(crate) type Device = Option<String>;

#[derive(Debug, Default)]
struct Queue {
    waiting: VecDeque<usize>,
    busy: BTreeSet<String>,
}

/// Runs `run(i)` for every job `i` of `devices` on at most `jobs` threads and returns the
/// results in job order; `done(i, &result)` is called (on the job's thread, one call at a time)
/// as each one ends.
pub(crate) fn run_jobs<T: Send>(
    devices: &[Device],
    jobs: usize,
    run: impl Fn(usize) -> T + Sync,
    done: impl Fn(usize, &T) + Sync,
) -> Vec<T> {
    let queue = Mutex::new(Queue {
        waiting: (0..devices.len()).collect(),
        busy: BTreeSet::new(),
    });
    let freed = Condvar::new();
    let results: Mutex<Vec<Option<T>>> = Mutex::new((0..devices.len()).map(|_| None).collect());
    let report = Mutex::new(());
    let threads = jobs.clamp(1, devices.len().max(1));
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                while let Some(i) = next_job(&queue, &freed, devices) {
                    // Frees the device even if the job panics, so that no thread waits for it
                    // forever (the panic then ends the scope).
                    let _device = Held {
                        queue: &queue,
                        freed: &freed,
                        device: devices[i].as_deref(),
                    };
                    let result = run(i);
                    {
                        let _one_at_a_time = report.lock().unwrap_or_else(PoisonError::into_inner);
                        done(i, &result);
                    }
                    results.lock().unwrap_or_else(PoisonError::into_inner)[i] = Some(result);
                }
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner)
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect()
}

/// A device held by a running job, freed when the job ends (or panics).
struct Held<'a> {
    queue: &'a Mutex<Queue>,
    freed: &'a Condvar,
    device: Option<&'a str>,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if let Some(device) = self.device {
            let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
            q.busy.remove(device);
            self.freed.notify_all();
        }
    }
}

/// Takes the first waiting job this thread may start, waiting while every waiting job needs a
/// busy device; `None` once nothing is left.
fn next_job(queue: &Mutex<Queue>, freed: &Condvar, devices: &[Device]) -> Option<usize> {
    let mut q = queue.lock().unwrap_or_else(PoisonError::into_inner);
    loop {
        if q.waiting.is_empty() {
            return None;
        }
        let startable = q
            .waiting
            .iter()
            .position(|&i| devices[i].as_ref().is_none_or(|d| !q.busy.contains(d)));
        if let Some(at) = startable {
            let i = q.waiting.remove(at).expect("position is in range");
            if let Some(device) = &devices[i] {
                q.busy.insert(device.clone());
            }
            return Some(i);
        }
        q = freed.wait(q).unwrap_or_else(PoisonError::into_inner);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    /// Runs jobs that sleep a little, counting how many run at once in total and per device.
    fn peaks(devices: &[Device], jobs: usize) -> (usize, BTreeMap<String, usize>, Vec<usize>) {
        let running = AtomicUsize::new(0);
        let peak = AtomicUsize::new(0);
        let per_device: Mutex<BTreeMap<String, (usize, usize)>> = Mutex::default();
        let finished = Mutex::new(Vec::new());
        let results = run_jobs(
            devices,
            jobs,
            |i| {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                if let Some(d) = &devices[i] {
                    let mut map = per_device.lock().unwrap();
                    let entry = map.entry(d.clone()).or_default();
                    entry.0 += 1;
                    entry.1 = entry.1.max(entry.0);
                }
                std::thread::sleep(Duration::from_millis(20));
                if let Some(d) = &devices[i] {
                    per_device.lock().unwrap().get_mut(d).unwrap().0 -= 1;
                }
                running.fetch_sub(1, Ordering::SeqCst);
                i * 10
            },
            |i, _| finished.lock().unwrap().push(i),
        );
        assert_eq!(
            results,
            (0..devices.len()).map(|i| i * 10).collect::<Vec<_>>()
        );
        let per_device = per_device
            .into_inner()
            .unwrap()
            .into_iter()
            .map(|(d, (_, peak))| (d, peak))
            .collect();
        (
            peak.load(Ordering::SeqCst),
            per_device,
            finished.into_inner().unwrap(),
        )
    }

    #[test]
    fn shared_jobs_run_side_by_side_up_to_the_limit() {
        let devices = vec![None; 6];
        let (peak, _, finished) = peaks(&devices, 3);
        assert_eq!(peak, 3);
        assert_eq!(finished.len(), 6);
    }

    #[test]
    fn exclusive_jobs_of_one_device_never_overlap_but_other_devices_do() {
        let phone = Some("phone".to_owned());
        let host = Some("host".to_owned());
        let devices = vec![
            phone.clone(),
            phone.clone(),
            host.clone(),
            phone.clone(),
            host.clone(),
            None,
            None,
        ];
        let (peak, per_device, finished) = peaks(&devices, 4);
        assert_eq!(per_device["phone"], 1);
        assert_eq!(per_device["host"], 1);
        assert!(
            peak >= 2,
            "different devices and shared jobs overlap: {peak}"
        );
        assert_eq!(finished.len(), devices.len());
    }

    #[test]
    fn one_thread_runs_in_list_order() {
        let devices = vec![None, Some("d".to_owned()), None];
        let (peak, _, finished) = peaks(&devices, 1);
        assert_eq!(peak, 1);
        assert_eq!(finished, [0, 1, 2]);
    }

    #[test]
    fn a_panicking_job_frees_its_device_and_the_panic_reaches_the_caller() {
        let devices = vec![Some("d".to_owned()), Some("d".to_owned()), None];
        let ran = AtomicUsize::new(0);
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_jobs(
                &devices,
                2,
                |i| {
                    ran.fetch_add(1, Ordering::SeqCst);
                    assert_ne!(i, 0, "job 0 panics");
                },
                |_, _| {},
            )
        }));
        assert!(outcome.is_err());
        assert_eq!(
            ran.load(Ordering::SeqCst),
            3,
            "the device was freed for job 1"
        );
    }

    #[test]
    fn no_jobs_is_no_work() {
        let results: Vec<u8> = run_jobs(&[], 4, |_| 1, |_, _| {});
        assert!(results.is_empty());
    }
}
