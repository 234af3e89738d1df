/* Work handles: the core's wrapper around a backend's in-flight operation. */
#ifndef TC_WORK_H
#define TC_WORK_H

#include <tcomms/backend.h>

/* Wait for `bwork` (a blocking call), free it, and return its status. */
tcomms_status_t tc_work_block(const tcomms_backend_t *be, void *bwork, uint32_t timeout_ms);
/* Wrap `bwork` into a public handle. */
tcomms_status_t tc_work_wrap(const tcomms_backend_t *be, void *bwork, uint32_t timeout_ms, tcomms_work_t **out);

#endif
