//! The worker gang: `ParallelGCThreads` VM threads, created once, reused for every parallel
//! task (pretouch is the first), joined at shutdown.
//!
//! One task runs at a time. [`WorkerGang::run`] blocks until its task is done;
//! [`WorkerGang::start`] returns a [`TaskHandle`] to wait for or poll (background pretouch).
//! With zero workers a task runs on the calling thread, as HotSpot's pretouch does without a
//! gang.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::threads::{self, Registry, StackPolicy, ThreadError, ThreadKind, VmThread};

/// Work that a gang runs on several threads at once.
pub trait GangTask: Send + Sync + 'static {
    /// Called once on each participating worker, with ids `0..workers`.
    fn work(&self, worker_id: usize);
}

#[derive(Default)]
struct State {
    /// The task being run and how many workers take part.
    task: Option<(Arc<dyn GangTask>, usize)>,
    /// Bumped for every task, so a worker runs each task at most once.
    generation: u64,
    /// Workers that have finished the current task.
    finished: usize,
    /// Workers still to pick up the current task.
    to_claim: usize,
    shutdown: bool,
}

struct Shared {
    state: Mutex<State>,
    /// Workers wait here for work; the submitter waits here for completion.
    cv: Condvar,
    /// Submitters wait here for the gang to become free.
    free: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A gang of worker threads.
pub struct WorkerGang {
    shared: Arc<Shared>,
    workers: Vec<VmThread>,
}

impl std::fmt::Debug for WorkerGang {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerGang")
            .field("workers", &self.workers.len())
            .finish()
    }
}

/// A task started on the gang.
#[derive(Clone)]
pub struct TaskHandle {
    shared: Arc<Shared>,
    generation: u64,
}

impl std::fmt::Debug for TaskHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskHandle")
            .field("generation", &self.generation)
            .finish()
    }
}

impl TaskHandle {
    fn done_locked(&self, s: &State) -> bool {
        s.generation != self.generation || s.task.is_none()
    }

    /// Whether every worker has finished the task.
    pub fn is_done(&self) -> bool {
        self.done_locked(&self.shared.lock())
    }

    /// Waits until every worker has finished the task.
    pub fn wait(&self) {
        let mut s = self.shared.lock();
        while !self.done_locked(&s) {
            s = self.shared.cv.wait(s).unwrap_or_else(|p| p.into_inner());
        }
    }
}

impl WorkerGang {
    /// Starts `count` workers named `Worker#<n>`. On failure the workers already started are
    /// stopped and joined, and the error names the thread that failed.
    pub(crate) fn new(
        count: usize,
        registry: &Arc<Registry>,
        policy: &StackPolicy,
    ) -> Result<WorkerGang, ThreadError> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            cv: Condvar::new(),
            free: Condvar::new(),
        });
        let mut gang = WorkerGang {
            shared,
            workers: Vec::with_capacity(count),
        };
        for id in 0..count {
            let shared = Arc::clone(&gang.shared);
            let body = Box::new(move || worker_loop(&shared, id));
            // On error `gang` is dropped, which stops and joins the workers made so far.
            let t = threads::spawn(
                registry,
                policy,
                &format!("Worker#{id}"),
                ThreadKind::Worker,
                None,
                false,
                body,
            )?;
            gang.workers.push(t);
        }
        Ok(gang)
    }

    /// Number of workers.
    pub fn size(&self) -> usize {
        self.workers.len()
    }

    /// Starts `task` on `workers` workers (at most the gang's size; at least one if the gang
    /// has any) once the gang is free, and returns at once. With an empty gang the task runs
    /// on the calling thread before this returns.
    pub fn start(&self, task: Arc<dyn GangTask>, workers: usize) -> TaskHandle {
        if self.workers.is_empty() {
            task.work(0);
            let s = self.shared.lock();
            // A generation that is not current: the handle is done at once.
            return TaskHandle {
                shared: Arc::clone(&self.shared),
                generation: s.generation.wrapping_sub(1),
            };
        }
        let workers = workers.clamp(1, self.workers.len());
        let mut s = self.shared.lock();
        while s.task.is_some() {
            s = self.shared.free.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        s.generation += 1;
        s.task = Some((task, workers));
        s.finished = 0;
        s.to_claim = workers;
        let handle = TaskHandle {
            shared: Arc::clone(&self.shared),
            generation: s.generation,
        };
        self.shared.cv.notify_all();
        handle
    }

    /// Runs `task` on `workers` workers and waits for it.
    pub fn run(&self, task: Arc<dyn GangTask>, workers: usize) {
        self.start(task, workers).wait();
    }
}

fn worker_loop(shared: &Shared, _id: usize) {
    let mut seen = 0u64;
    loop {
        let (task, worker_id, generation) = {
            let mut s = shared.lock();
            loop {
                if s.shutdown {
                    return;
                }
                if s.generation != seen && s.to_claim > 0 {
                    if let Some((task, n)) = &s.task {
                        let task = Arc::clone(task);
                        let worker_id = n - s.to_claim;
                        s.to_claim -= 1;
                        break (task, worker_id, s.generation);
                    }
                }
                s = shared.cv.wait(s).unwrap_or_else(|p| p.into_inner());
            }
        };
        seen = generation;
        task.work(worker_id);
        let mut s = shared.lock();
        if s.generation == generation {
            s.finished += 1;
            if s.task.as_ref().is_some_and(|(_, n)| s.finished == *n) {
                // The last worker frees the gang for the next task.
                s.task = None;
                shared.free.notify_all();
            }
        }
        shared.cv.notify_all();
    }
}

impl Drop for WorkerGang {
    fn drop(&mut self) {
        {
            let mut s = self.shared.lock();
            s.shutdown = true;
            self.shared.cv.notify_all();
        }
        for t in self.workers.drain(..) {
            if let Err(e) = t.join() {
                log::error!(target: "os+thread", "{e}");
            }
        }
    }
}
