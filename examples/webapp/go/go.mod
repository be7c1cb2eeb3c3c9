module example.com/webapp

go 1.24

require github.com/wasmop/wasmop/sdk-go v0.1.0

replace github.com/wasmop/wasmop/sdk-go => ../../../sdk-go
