// The process's own address space as a base::VaSpace: a range reserved PROT_NONE with no
// swap reserved, pieces made readable and writable on commit. One object serves every heap.
#pragma once

#include "base/va_space.h"

namespace doorbell::mem {

base::VaSpace& os_va_space();

}  // namespace doorbell::mem
