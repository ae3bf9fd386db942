//! The worker gang: up to `ParallelGCThreads` VM threads, reused for every parallel task
//! (pretouch is the first), stopped and joined by the VM's destroy. As HotSpot's gangs do
//! (`UseDynamicNumberOfGCThreads`), one worker starts with the VM and the others when a task
//! first asks for them; a worker that cannot be started then (a thread limit) is logged and
//! the task runs on the workers there are.
//!
//! Tasks are queued first in, first out. [`WorkerGang::start`] queues a task and returns a
//! [`TaskHandle`] to wait for or poll at once — a background pretouch never waits for the
//! gang, and never runs on the caller while the gang exists; a task behind another starts
//! when workers free up (a worker takes a share of the first task that still has one, so a
//! task asking for fewer workers than the gang has leaves the rest to the next).
//! [`WorkerGang::run_now`] is for work that must not wait behind a long task (a heap
//! expansion during a background pretouch): on the gang if it is idle, else on the caller.
//! With zero workers (or once stopped) a task runs on the calling thread, as HotSpot's
//! pretouch does without a gang.
//!
//! A task may pause ([`GangTask::ready`], [`GangTask::finished`]): a worker whose share
//! returns unfinished gives the share back and takes other work; the task's shares are taken
//! up again once it is ready and someone [wakes](GangWaker) the gang. A held background
//! pretouch pauses this way, so a hold never keeps a worker — or the tasks queued behind it —
//! waiting.
//!
//! A task that panics on a worker does not take the worker or the gang with it: the panic is
//! caught, the worker counts as finished with that task, and whoever waits for the task gets
//! a [`TaskPanicked`] error. The gang takes the next task as usual.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::threads::{
    self, panic_message, Body, Registry, StackPolicy, ThreadError, ThreadKind, VmThread,
};

/// Work that a gang runs on several threads at once.
pub trait GangTask: Send + Sync + 'static {
    /// Called on each participating worker, with ids `0..workers` — once, unless the share
    /// returns unfinished (see [`finished`](GangTask::finished)): then again later, on any
    /// worker, with the same id.
    fn work(&self, worker_id: usize);

    /// Whether a worker may take up a share now (checked under the gang's lock: keep it
    /// cheap). A task that is not ready keeps its place in the queue; the workers take later
    /// tasks meanwhile, and look again when the gang is [woken](GangWaker::wake).
    fn ready(&self) -> bool {
        true
    }

    /// Asked after a share's [`work`](GangTask::work) returned: `false` means it paused with
    /// work left, and the share is given back to be taken up again.
    fn finished(&self) -> bool {
        true
    }
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

/// One queued or running task; its counters change under the gang's lock.
struct Job {
    /// The task, until its last worker finishes: then nothing the task holds (a reservation
    /// it pretouched) outlives it, whoever keeps the handle.
    task: Option<Arc<dyn GangTask>>,
    /// Workers that take part.
    workers: usize,
    /// Shares handed to workers so far.
    claimed: usize,
    /// Workers that have finished their share.
    finished: usize,
    /// The first panic.
    panicked: Option<TaskPanicked>,
    /// Ids of shares given back unfinished, to be handed out again.
    returned: Vec<usize>,
}

impl Job {
    fn done(&self) -> bool {
        self.finished == self.workers
    }

    /// The id for the next share: one given back, else the next new one.
    fn next_id(&mut self) -> usize {
        // With none given back, the ids handed out are 0..claimed.
        self.returned.pop().unwrap_or(self.claimed)
    }
}

type JobRef = Arc<Mutex<Job>>;

#[derive(Default)]
struct State {
    /// Tasks with shares not yet handed out, oldest first.
    queue: VecDeque<JobRef>,
    /// Tasks queued or running.
    active: usize,
    shutdown: bool,
}

struct Shared {
    state: Mutex<State>,
    /// Workers wait here for work; waiters here for their task to finish.
    cv: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn lock_job(job: &JobRef) -> MutexGuard<'_, Job> {
    job.lock().unwrap_or_else(|p| p.into_inner())
}

/// A gang of worker threads.
pub struct WorkerGang {
    shared: Arc<Shared>,
    workers: Mutex<Vec<VmThread>>,
    /// `ParallelGCThreads`: how many workers the gang may have.
    capacity: usize,
    registry: Arc<Registry>,
    policy: StackPolicy,
    /// The process generation the workers run in: in a child of `fork()` they do not exist,
    /// and the gang behaves as a stopped one (tasks run on the caller; nothing is joined).
    generation: u64,
}

impl std::fmt::Debug for WorkerGang {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerGang")
            .field("workers", &self.size())
            .finish()
    }
}

/// Wakes a gang's idle workers, so that they look again at the tasks that were not ready
/// (see [`GangTask::ready`]).
#[derive(Clone)]
pub struct GangWaker {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for GangWaker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GangWaker").finish_non_exhaustive()
    }
}

impl GangWaker {
    /// Wakes the gang's workers.
    pub fn wake(&self) {
        // Under the lock: a worker that found the task not ready is waiting by the time this
        // notifies (it checked and began to wait while holding the lock).
        let _s = self.shared.lock();
        self.shared.cv.notify_all();
    }

    /// Whether both wake the same gang.
    pub(crate) fn same_gang(&self, other: &GangWaker) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }
}

/// A task started on the gang.
#[derive(Clone)]
pub struct TaskHandle {
    shared: Arc<Shared>,
    job: JobRef,
}

impl std::fmt::Debug for TaskHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskHandle")
            .field("done", &self.is_done())
            .finish()
    }
}

impl TaskHandle {
    /// Whether every worker has finished the task.
    pub fn is_done(&self) -> bool {
        lock_job(&self.job).done()
    }

    /// Waits until every worker has finished the task; the first panic of the task, if any,
    /// is the error.
    pub fn wait(&self) -> Result<(), TaskPanicked> {
        let mut s = self.shared.lock();
        while !lock_job(&self.job).done() {
            s = self.shared.cv.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        drop(s);
        lock_job(&self.job).panicked.clone().map_or(Ok(()), Err)
    }
}

/// Runs `task.work(worker_id)`; a panic is caught and returned.
fn run_caught(task: &dyn GangTask, worker_id: usize) -> Option<TaskPanicked> {
    let p = catch_unwind(AssertUnwindSafe(|| task.work(worker_id))).err()?;
    let message = panic_message(&*p);
    log::error!(target: "gc+task", "A parallel task panicked on worker {worker_id}: {message}");
    Some(TaskPanicked {
        worker: worker_id,
        message,
    })
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
            }),
            workers: Mutex::new(Vec::new()),
            capacity,
            registry: Arc::clone(registry),
            policy: policy.clone(),
            generation: rtvm_os_linux::system::process_generation(),
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

    /// A waker for this gang's workers.
    pub fn waker(&self) -> GangWaker {
        GangWaker {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Starts workers until there are `wanted` (at most the capacity); returns how many there
    /// are. A worker that cannot be started is logged (by the thread layer) and the gang goes
    /// on with fewer.
    fn grow_to(&self, wanted: usize) -> usize {
        if !self.in_creator_process() {
            return 0;
        }
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

    /// Whether the workers live in this process (not in a child of `fork()`).
    fn in_creator_process(&self) -> bool {
        self.generation == rtvm_os_linux::system::process_generation()
    }

    /// How many workers the gang may have (`ParallelGCThreads`; 0 once it is stopped, and in
    /// a child of `fork()`: tasks then run on the caller). Workers start when a task first
    /// needs them.
    pub fn size(&self) -> usize {
        if self.shared.lock().shutdown || !self.in_creator_process() {
            0
        } else {
            self.capacity
        }
    }

    /// A handle to a task that already ran (on the caller).
    fn ran(&self, panicked: Option<TaskPanicked>) -> TaskHandle {
        TaskHandle {
            shared: Arc::clone(&self.shared),
            job: Arc::new(Mutex::new(Job {
                task: None,
                workers: 1,
                claimed: 1,
                finished: 1,
                panicked,
                returned: Vec::new(),
            })),
        }
    }

    /// Queues `task` for `workers` workers (at most the gang's size; at least one) and
    /// returns at once; it starts when workers are free, after the tasks queued before it.
    /// With an empty (or stopped) gang the task runs on the calling thread before this
    /// returns.
    pub fn start(&self, task: Arc<dyn GangTask>, workers: usize) -> TaskHandle {
        let size = self.grow_to(workers.max(1));
        let mut s = self.shared.lock();
        if size == 0 || s.shutdown {
            drop(s);
            let panicked = run_caught(&*task, 0);
            return self.ran(panicked);
        }
        self.queue_locked(&mut s, task, workers.clamp(1, size))
    }

    fn queue_locked(&self, s: &mut State, task: Arc<dyn GangTask>, workers: usize) -> TaskHandle {
        let job = Arc::new(Mutex::new(Job {
            task: Some(task),
            workers,
            claimed: 0,
            finished: 0,
            panicked: None,
            returned: Vec::new(),
        }));
        s.queue.push_back(Arc::clone(&job));
        s.active += 1;
        self.shared.cv.notify_all();
        TaskHandle {
            shared: Arc::clone(&self.shared),
            job,
        }
    }

    /// Runs `task` on `workers` workers and waits for it.
    #[cfg(any(test, feature = "testing"))]
    pub fn run(&self, task: Arc<dyn GangTask>, workers: usize) -> Result<(), TaskPanicked> {
        self.start(task, workers).wait()
    }

    /// Runs `task` on the gang if no other task is queued or running, else on the calling
    /// thread alone, and waits: for work that must not wait for a long task already running
    /// (a heap expansion during a background pretouch).
    pub fn run_now(&self, task: Arc<dyn GangTask>, workers: usize) -> Result<(), TaskPanicked> {
        let size = self.grow_to(workers.max(1));
        let mut s = self.shared.lock();
        if size == 0 || s.shutdown || s.active > 0 {
            drop(s);
            return run_caught(&*task, 0).map_or(Ok(()), Err);
        }
        let handle = self.queue_locked(&mut s, task, workers.clamp(1, size));
        drop(s);
        handle.wait()
    }

    /// Stops the workers (tasks already queued are finished first) and joins them; returns
    /// the panics of worker threads, if any. Later tasks run on the caller.
    pub(crate) fn stop(&self) -> Vec<String> {
        if !self.in_creator_process() {
            // The workers are the parent's: forget them, joining would wait forever.
            std::mem::forget(std::mem::take(&mut *self.lock_workers()));
            return Vec::new();
        }
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

/// A share of a job a worker took: the job, its task (`None` once it is done) and the id.
type Share = (JobRef, Option<Arc<dyn GangTask>>, usize);

/// The first queued job with a share left whose task is ready, with the share claimed.
fn claim_share(s: &mut State) -> Option<Share> {
    let at = s.queue.iter().position(|job| {
        let j = lock_job(job);
        j.task.as_ref().is_none_or(|t| t.ready())
    })?;
    let job = Arc::clone(&s.queue[at]);
    let mut j = lock_job(&job);
    let (id, task) = (j.next_id(), j.task.clone());
    j.claimed += 1;
    let fully_claimed = j.claimed == j.workers;
    drop(j);
    if fully_claimed {
        s.queue.remove(at);
    }
    Some((job, task, id))
}

fn worker_loop(shared: &Shared) {
    let mut worked = false;
    loop {
        let (job, task, worker_id) = {
            let mut s = shared.lock();
            loop {
                // Queued tasks are still done after a shutdown: their submitters wait.
                if let Some(share) = claim_share(&mut s) {
                    break share;
                }
                if s.shutdown && s.queue.is_empty() {
                    return;
                }
                if std::mem::take(&mut worked) {
                    // Idle after work: give back the stack pages the task's frames touched
                    // (outside the lock; then look for work again).
                    drop(s);
                    let _ = rtvm_os_linux::stack::trim_own_stack();
                    s = shared.lock();
                    continue;
                }
                s = shared.cv.wait(s).unwrap_or_else(|p| p.into_inner());
            }
        };
        let panicked = task
            .as_ref()
            .and_then(|task| run_caught(&**task, worker_id));
        // A panic ends the share; a task that paused gives it back.
        let paused = panicked.is_none() && task.as_ref().is_some_and(|t| !t.finished());
        // Nothing the task holds (a reservation it pretouched) may outlive the moment its
        // waiter learns that it is done.
        drop(task);
        worked = true;
        let mut s = shared.lock();
        let mut j = lock_job(&job);
        if paused {
            j.claimed -= 1;
            j.returned.push(worker_id);
            if !s.queue.iter().any(|q| Arc::ptr_eq(q, &job)) {
                // Back at the front: it was queued before anything behind it.
                s.queue.push_front(Arc::clone(&job));
            }
        } else {
            j.finished += 1;
            if j.panicked.is_none() {
                j.panicked = panicked;
            }
            if j.done() {
                // The last one out: the task (and what it holds) goes before anyone learns
                // that it is done.
                j.task = None;
                s.active -= 1;
            }
        }
        drop(j);
        drop(s);
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
