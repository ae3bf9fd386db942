//! The worker gang: up to `ParallelGCThreads` VM threads, reused for every parallel task
//! (pretouch is the first), stopped and joined by the VM's destroy. As HotSpot's gangs do
//! (`UseDynamicNumberOfGCThreads`), one worker starts with the VM and the others when a task
//! first asks for them; a worker that cannot be started then (a thread limit) is logged and
//! the task runs on the workers there are.
//!
//! One task runs at a time. [`WorkerGang::run`] blocks until its task is done;
//! [`WorkerGang::start`] returns a [`TaskHandle`] to wait for or poll (background pretouch).
//! With zero workers a task runs on the calling thread, as HotSpot's pretouch does without a
//! gang.
//!
//! A task that panics on a worker does not take the worker or the gang with it: the panic is
//! caught, the worker counts as finished with that task, and whoever waits for the task gets
//! a [`TaskPanicked`] error. The gang takes the next task as usual.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::threads::{
    self, panic_message, Body, Registry, StackPolicy, ThreadError, ThreadKind, VmThread,
};

/// Work that a gang runs on several threads at once.
pub trait GangTask: Send + Sync + 'static {
    /// Called once on each participating worker, with ids `0..workers`.
    fn work(&self, worker_id: usize);
}

/// A gang task panicked on a worker (the first panic is reported).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a parallel task panicked on worker {worker}: {message}")]
pub struct TaskPanicked {
    /// The worker id (0 when the task ran on the caller).
    pub worker: usize,
    /// The panic message.
    pub message: String,
}

/// Where a task's outcome is kept until its waiter looks.
type Outcome = Arc<Mutex<Option<TaskPanicked>>>;

#[derive(Default)]
struct State {
    /// The task being run, how many workers take part, and its outcome slot.
    task: Option<(Arc<dyn GangTask>, usize, Outcome)>,
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
    workers: Mutex<Vec<VmThread>>,
    /// `ParallelGCThreads`: how many workers the gang may have.
    capacity: usize,
    registry: Arc<Registry>,
    policy: StackPolicy,
}

impl std::fmt::Debug for WorkerGang {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerGang")
            .field("workers", &self.size())
            .finish()
    }
}

/// A task started on the gang.
#[derive(Clone)]
pub struct TaskHandle {
    shared: Arc<Shared>,
    generation: u64,
    outcome: Outcome,
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

    /// Waits until every worker has finished the task; the first panic of the task, if any,
    /// is the error.
    pub fn wait(&self) -> Result<(), TaskPanicked> {
        let mut s = self.shared.lock();
        while !self.done_locked(&s) {
            s = self.shared.cv.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        drop(s);
        match self
            .outcome
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
        {
            Some(p) => Err(p),
            None => Ok(()),
        }
    }
}

/// Runs `task.work(worker_id)`, catching a panic into `outcome` (the first one wins).
fn run_caught(task: &dyn GangTask, worker_id: usize, outcome: &Outcome) {
    if let Err(p) = catch_unwind(AssertUnwindSafe(|| task.work(worker_id))) {
        let message = panic_message(&*p);
        log::error!(target: "gc+task", "A parallel task panicked on worker {worker_id}: {message}");
        outcome
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(TaskPanicked {
                worker: worker_id,
                message,
            });
    }
}

impl WorkerGang {
    /// A gang of up to `capacity` workers named `Worker#<n>`, the first started now (its
    /// failure is the error: the VM cannot start without it, as HotSpot's cannot).
    pub(crate) fn new(
        capacity: usize,
        registry: &Arc<Registry>,
        policy: &StackPolicy,
    ) -> Result<WorkerGang, ThreadError> {
        let gang = WorkerGang {
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                cv: Condvar::new(),
                free: Condvar::new(),
            }),
            workers: Mutex::new(Vec::new()),
            capacity,
            registry: Arc::clone(registry),
            policy: policy.clone(),
        };
        if capacity > 0 {
            let first = gang.spawn_worker(0)?;
            gang.lock_workers().push(first);
        }
        Ok(gang)
    }

    fn spawn_worker(&self, id: usize) -> Result<VmThread, ThreadError> {
        let shared = Arc::clone(&self.shared);
        let body = Body::Rust(Box::new(move || worker_loop(&shared)));
        threads::spawn(
            &self.registry,
            &self.policy,
            &format!("Worker#{id}"),
            ThreadKind::Worker,
            None,
            false,
            body,
        )
    }

    /// Starts workers until there are `wanted` (at most the capacity); returns how many there
    /// are. A worker that cannot be started is logged (by the thread layer) and the gang goes
    /// on with fewer.
    fn grow_to(&self, wanted: usize) -> usize {
        let mut workers = self.lock_workers();
        let wanted = wanted.min(self.capacity);
        while workers.len() < wanted && !self.shared.lock().shutdown {
            match self.spawn_worker(workers.len()) {
                Ok(t) => workers.push(t),
                Err(e) => {
                    log::info!(target: "gc+task", "The gang goes on with {} of {wanted} workers: {e}", workers.len());
                    break;
                }
            }
        }
        workers.len()
    }

    fn lock_workers(&self) -> MutexGuard<'_, Vec<VmThread>> {
        self.workers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many workers the gang may have (`ParallelGCThreads`; 0 once it is stopped: tasks
    /// then run on the caller). Workers start when a task first needs them.
    pub fn size(&self) -> usize {
        if self.shared.lock().shutdown {
            0
        } else {
            self.capacity
        }
    }

    /// Starts `task` on `workers` workers (at most the gang's size; at least one if the gang
    /// has any) once the gang is free, and returns at once. With an empty gang the task runs
    /// on the calling thread before this returns.
    pub fn start(&self, task: Arc<dyn GangTask>, workers: usize) -> TaskHandle {
        let outcome: Outcome = Arc::default();
        let size = self.grow_to(workers.max(1));
        if size == 0 || self.shared.lock().shutdown {
            run_caught(&*task, 0, &outcome);
            let s = self.shared.lock();
            // A generation that is not current: the handle is done at once.
            return TaskHandle {
                shared: Arc::clone(&self.shared),
                generation: s.generation.wrapping_sub(1),
                outcome,
            };
        }
        let mut s = self.shared.lock();
        while s.task.is_some() {
            s = self.shared.free.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        self.start_locked(s, task, workers.min(size), outcome)
    }

    /// Starts `task` if the gang is free right now; `None` if another task is running.
    pub fn try_start(&self, task: Arc<dyn GangTask>, workers: usize) -> Option<TaskHandle> {
        let size = self.grow_to(workers.max(1));
        let s = self.shared.lock();
        if size == 0 || s.shutdown {
            drop(s);
            return Some(self.start(task, workers));
        }
        if s.task.is_some() {
            return None;
        }
        Some(self.start_locked(s, task, workers.min(size), Arc::default()))
    }

    fn start_locked(
        &self,
        mut s: MutexGuard<'_, State>,
        task: Arc<dyn GangTask>,
        workers: usize,
        outcome: Outcome,
    ) -> TaskHandle {
        let workers = workers.max(1);
        s.generation += 1;
        s.task = Some((task, workers, Arc::clone(&outcome)));
        s.finished = 0;
        s.to_claim = workers;
        let handle = TaskHandle {
            shared: Arc::clone(&self.shared),
            generation: s.generation,
            outcome,
        };
        self.shared.cv.notify_all();
        handle
    }

    /// Runs `task` on `workers` workers and waits for it.
    #[cfg(any(test, feature = "testing"))]
    pub fn run(&self, task: Arc<dyn GangTask>, workers: usize) -> Result<(), TaskPanicked> {
        self.start(task, workers).wait()
    }

    /// Runs `task` on the gang if it is free, else on the calling thread alone: for work that
    /// must not wait for a long task already running (a heap expansion during a background
    /// pretouch).
    pub fn run_now(&self, task: Arc<dyn GangTask>, workers: usize) -> Result<(), TaskPanicked> {
        match self.try_start(Arc::clone(&task), workers) {
            Some(handle) => handle.wait(),
            None => {
                let outcome: Outcome = Arc::default();
                run_caught(&*task, 0, &outcome);
                let panicked = outcome.lock().unwrap_or_else(|p| p.into_inner()).take();
                panicked.map_or(Ok(()), Err)
            }
        }
    }

    /// Stops the workers (a task already started is finished first) and joins them; returns
    /// the panics of worker threads, if any. Later tasks run on the caller.
    pub(crate) fn stop(&self) -> Vec<String> {
        {
            let mut s = self.shared.lock();
            s.shutdown = true;
            self.shared.cv.notify_all();
        }
        let workers = std::mem::take(&mut *self.lock_workers());
        let mut errors = Vec::new();
        for t in workers {
            if let Err(e) = t.join() {
                errors.push(e.to_string());
            }
        }
        errors
    }
}

fn worker_loop(shared: &Shared) {
    let mut seen = 0u64;
    loop {
        let (task, worker_id, generation, outcome) = {
            let mut s = shared.lock();
            loop {
                // A task started before the shutdown is still done: its submitter waits for it.
                if s.generation != seen && s.to_claim > 0 {
                    if let Some((task, n, outcome)) = &s.task {
                        let task = Arc::clone(task);
                        let outcome = Arc::clone(outcome);
                        let worker_id = n - s.to_claim;
                        s.to_claim -= 1;
                        break (task, worker_id, s.generation, outcome);
                    }
                }
                if s.shutdown {
                    return;
                }
                s = shared.cv.wait(s).unwrap_or_else(|p| p.into_inner());
            }
        };
        seen = generation;
        run_caught(&*task, worker_id, &outcome);
        drop(task);
        let mut s = shared.lock();
        if s.generation == generation {
            s.finished += 1;
            if s.task.as_ref().is_some_and(|(_, n, _)| s.finished == *n) {
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
        for e in self.stop() {
            log::error!(target: "os+thread", "{e}");
        }
    }
}
