module github.com/wasmop/wasmop/plugins/sidecarset-go

go 1.24

require github.com/wasmop/wasmop/sdk-go v0.0.0

replace github.com/wasmop/wasmop/sdk-go => ../../sdk-go
