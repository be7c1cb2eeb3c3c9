package main

import "unsafe"

// The allocator of the WASI preview-1 adapter's own state (wit-component gives the adapter
// `cabi_realloc_adapter` when the module exports it, `cabi_realloc` otherwise): always the
// break (`runtime.sbrk`), never the Go heap, before and after the Go runtime is initialized.
//
// The adapter allocates its state on its first WASI call. In a module whose `_initialize` ran
// at build time (a pre-initialized snapshot, sdk-go/build/component.sh) that first call comes
// after the runtime is up, where `cabi_realloc` would take the memory from the garbage
// collected heap (pinned only until the export returns) and call the adapter's clock from
// inside the adapter's own allocation. The break is what the adapter gets in a module that
// initializes per instance, and memory the Go heap never hands out again.

//go:linkname sbrk runtime.sbrk
func sbrk(n uintptr) unsafe.Pointer

//go:wasmexport cabi_realloc_adapter
func cabiReallocAdapter(oldPointer unsafe.Pointer, oldSize, align, newSize uintptr) unsafe.Pointer {
	if oldPointer != nil || oldSize != 0 {
		panic("cabi_realloc_adapter: the adapter only allocates")
	}
	// The break is rounded to whole pages (64 KiB): any alignment the adapter asks for.
	pointer := sbrk(newSize)
	if pointer == nil && newSize != 0 {
		panic("cabi_realloc_adapter: out of memory")
	}
	return pointer
}
