//! The machine the VM sizes itself for: memory and processors (the host's, or its
//! container's when `UseContainerSupport` finds limits — HotSpot's `os::physical_memory` and
//! `os::active_processor_count`), the process's limits, and the page and stack facts of the
//! host. Detected once; every ergonomic decision reads it, so tests can give a fake one.

use rtvm_os_linux::container::{self, ContainerInfo};
use rtvm_os_linux::pages::{HugetlbInfo, SysRoots};
use rtvm_os_linux::stack::{minimum_usable_stack, recommended_alt_stack_size};
use rtvm_os_linux::{base_page_size, system};

/// What the machine offers.
#[derive(Debug)]
pub(crate) struct Machine {
    pub host_memory: u64,
    pub host_processors: usize,
    /// The container's limits, if container support found a hierarchy.
    pub container: Option<ContainerInfo>,
    /// `RLIMIT_AS`, if set (HotSpot sizes the heap within half of it).
    pub address_space_limit: Option<u64>,
    /// `RLIMIT_STACK`: the system default thread stack size (`-Xss0`).
    pub stack_rlimit: Option<u64>,
    /// The base page size.
    pub base_page: usize,
    /// The least stack glibc needs (`PTHREAD_STACK_MIN`).
    pub min_usable_stack: usize,
    /// The alternate signal stack size (from `AT_MINSIGSTKSZ`).
    pub alt_stack_size: usize,
    /// Whether a huge page of a size can be mapped now (HotSpot's large page sanity check).
    pub hugetlb_usable: fn(usize) -> bool,
    /// `-XX:ActiveProcessorCount`, if set: the processor count, without a look at the CPU
    /// affinity or a container's quota (HotSpot reads no CPU file then).
    pub active_processor_count: Option<usize>,
}

impl Machine {
    /// Looks at the host and, with container support on, at the process's cgroups; says what
    /// it found under `os+container` and `os`, as HotSpot does.
    pub fn detect(container_support: bool, active_processor_count: i64) -> Machine {
        let host_memory = system::physical_memory().unwrap_or(1 << 30);
        let host_processors = system::affinity_processors();
        let active_processor_count = usize::try_from(active_processor_count)
            .ok()
            .filter(|&n| n > 0);
        let container = if container_support {
            let host = container::Host {
                memory: host_memory,
                processors: host_processors,
                active_processor_count,
            };
            let c = container::detect(&SysRoots::default(), host);
            for (level, text) in &c.notes {
                log::log!(target: "os+container", *level, "{text}");
            }
            Some(c).filter(|c| c.version.is_some())
        } else {
            log::trace!(target: "os+container", "OSContainer::init: Initializing Container Support");
            log::trace!(target: "os+container", "Container Support not enabled");
            None
        };
        let machine = Machine {
            host_memory,
            host_processors,
            container,
            address_space_limit: system::soft_limit(system::Limit::AddressSpace),
            stack_rlimit: system::stack_rlimit(),
            base_page: base_page_size(),
            min_usable_stack: minimum_usable_stack(),
            alt_stack_size: recommended_alt_stack_size(),
            hugetlb_usable: HugetlbInfo::sanity_check,
            active_processor_count,
        };
        match machine.container.as_ref().and_then(|c| c.memory_limit) {
            Some(limit) => log::trace!(target: "os", "total container memory: {limit}"),
            None => log::trace!(target: "os", "total system memory: {host_memory}"),
        }
        machine
    }

    /// The memory to size the heap for: the container's limit, else the host's.
    pub fn memory(&self) -> u64 {
        self.container
            .as_ref()
            .and_then(|c| c.memory_limit)
            .unwrap_or(self.host_memory)
    }

    /// The processors to size thread pools for (HotSpot's `os::active_processor_count`):
    /// `ActiveProcessorCount` if set, else the affinity mask under a container's quota.
    pub fn processors(&self) -> usize {
        self.active_processor_count.unwrap_or_else(|| {
            self.container
                .as_ref()
                .map_or(self.host_processors, |c| c.processors)
        })
    }
}

#[cfg(test)]
impl Machine {
    /// A host with `memory` bytes and `processors` CPUs, no container, no limits, 4K pages,
    /// and no usable hugetlbfs page.
    pub fn fake(memory: u64, processors: usize) -> Machine {
        Machine {
            host_memory: memory,
            host_processors: processors,
            container: None,
            address_space_limit: None,
            stack_rlimit: Some(8 << 20),
            base_page: 4096,
            min_usable_stack: 16 * 1024,
            alt_stack_size: 16 * 1024,
            hugetlb_usable: |_| false,
            active_processor_count: None,
        }
    }
}
