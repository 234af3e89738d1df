# The FSDP runtime (include/tcomms/fsdp.h), built into libtcomms: rank layout and communicator collection
# (layout.c, groups.c), then the runtime itself (runtime.c and the files rt.h lists).
lib_libtccore_la_SOURCES += \
	lib/fsdp/layout.c lib/fsdp/groups.c lib/fsdp/groups.h \
	lib/fsdp/rt.h lib/fsdp/runtime.c lib/fsdp/bucket.c lib/fsdp/gather.c lib/fsdp/reduce.c lib/fsdp/install.c \
	lib/fsdp/issue.c lib/fsdp/ops.c
