module @jit_adamw_update attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<16x24xf32>, %arg1: tensor<16x24xf32>) -> (tensor<16x24xf32> {jax.result_info = "result"}) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<16x24xf32>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<16x24xf32>
    %cst_1 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %2 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<16x24xf32>
    %3 = stablehlo.multiply %2, %arg1 : tensor<16x24xf32>
    %cst_2 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %4 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<16x24xf32>
    %5 = stablehlo.multiply %4, %0 : tensor<16x24xf32>
    %6 = stablehlo.add %3, %5 : tensor<16x24xf32>
    %7 = stablehlo.multiply %arg1, %arg1 : tensor<16x24xf32>
    %cst_3 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %8 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f32>) -> tensor<16x24xf32>
    %9 = stablehlo.multiply %8, %7 : tensor<16x24xf32>
    %cst_4 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %10 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<f32>) -> tensor<16x24xf32>
    %11 = stablehlo.multiply %10, %1 : tensor<16x24xf32>
    %12 = stablehlo.add %9, %11 : tensor<16x24xf32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_5 = stablehlo.constant dense<2147483647> : tensor<i32>
    %13 = stablehlo.compare LT, %c, %c_5, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_6 = stablehlo.constant dense<0> : tensor<i32>
    %c_7 = stablehlo.constant dense<1> : tensor<i32>
    %14 = stablehlo.add %c_6, %c_7 : tensor<i32>
    %c_8 = stablehlo.constant dense<2147483647> : tensor<i32>
    %15 = call @_where(%13, %14, %c_8) : (tensor<i1>, tensor<i32>, tensor<i32>) -> tensor<i32>
    %cst_9 = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %16 = stablehlo.broadcast_in_dim %cst_9, dims = [] : (tensor<f32>) -> tensor<16x24xf32>
    %17 = stablehlo.multiply %arg1, %16 : tensor<16x24xf32>
    %cst_10 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %18 = stablehlo.broadcast_in_dim %cst_10, dims = [] : (tensor<f32>) -> tensor<16x24xf32>
    %19 = stablehlo.multiply %18, %17 : tensor<16x24xf32>
    %cst_11 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %20 = stablehlo.broadcast_in_dim %cst_11, dims = [] : (tensor<f32>) -> tensor<16x24xf32>
    %21 = stablehlo.multiply %20, %6 : tensor<16x24xf32>
    %22 = stablehlo.add %19, %21 : tensor<16x24xf32>
    %23 = stablehlo.multiply %17, %17 : tensor<16x24xf32>
    %cst_12 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %24 = stablehlo.broadcast_in_dim %cst_12, dims = [] : (tensor<f32>) -> tensor<16x24xf32>
    %25 = stablehlo.multiply %24, %23 : tensor<16x24xf32>
    %cst_13 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %26 = stablehlo.broadcast_in_dim %cst_13, dims = [] : (tensor<f32>) -> tensor<16x24xf32>
    %27 = stablehlo.multiply %26, %12 : tensor<16x24xf32>
    %28 = stablehlo.add %25, %27 : tensor<16x24xf32>
    %c_14 = stablehlo.constant dense<2147483647> : tensor<i32>
    %29 = stablehlo.compare LT, %15, %c_14, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_15 = stablehlo.constant dense<1> : tensor<i32>
    %30 = stablehlo.add %15, %c_15 : tensor<i32>
    %c_16 = stablehlo.constant dense<2147483647> : tensor<i32>
    %31 = call @_where(%29, %30, %c_16) : (tensor<i1>, tensor<i32>, tensor<i32>) -> tensor<i32>
    %cst_17 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %32 = stablehlo.convert %31 : (tensor<i32>) -> tensor<f32>
    %33 = stablehlo.power %cst_17, %32 : tensor<f32>
    %cst_18 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %34 = stablehlo.subtract %cst_18, %33 : tensor<f32>
    %35 = stablehlo.broadcast_in_dim %34, dims = [] : (tensor<f32>) -> tensor<16x24xf32>
    %36 = stablehlo.divide %22, %35 : tensor<16x24xf32>
    %cst_19 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %37 = stablehlo.convert %31 : (tensor<i32>) -> tensor<f32>
    %38 = stablehlo.power %cst_19, %37 : tensor<f32>
    %cst_20 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %39 = stablehlo.subtract %cst_20, %38 : tensor<f32>
    %40 = stablehlo.broadcast_in_dim %39, dims = [] : (tensor<f32>) -> tensor<16x24xf32>
    %41 = stablehlo.divide %28, %40 : tensor<16x24xf32>
    %cst_21 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %42 = stablehlo.broadcast_in_dim %cst_21, dims = [] : (tensor<f32>) -> tensor<16x24xf32>
    %43 = stablehlo.add %41, %42 : tensor<16x24xf32>
    %44 = stablehlo.sqrt %43 : tensor<16x24xf32>
    %cst_22 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %45 = stablehlo.broadcast_in_dim %cst_22, dims = [] : (tensor<f32>) -> tensor<16x24xf32>
    %46 = stablehlo.add %44, %45 : tensor<16x24xf32>
    %47 = stablehlo.divide %36, %46 : tensor<16x24xf32>
    %cst_23 = stablehlo.constant dense<0.00999999977> : tensor<f32>
    %48 = stablehlo.broadcast_in_dim %cst_23, dims = [] : (tensor<f32>) -> tensor<16x24xf32>
    %49 = stablehlo.multiply %48, %arg0 : tensor<16x24xf32>
    %50 = stablehlo.add %47, %49 : tensor<16x24xf32>
    %cst_24 = stablehlo.constant dense<-1.000000e-03> : tensor<f32>
    %51 = stablehlo.broadcast_in_dim %cst_24, dims = [] : (tensor<f32>) -> tensor<16x24xf32>
    %52 = stablehlo.multiply %51, %50 : tensor<16x24xf32>
    %53 = stablehlo.add %arg0, %52 : tensor<16x24xf32>
    return %53 : tensor<16x24xf32>
  }
  func.func private @_where(%arg0: tensor<i1>, %arg1: tensor<i32>, %arg2: tensor<i32>) -> tensor<i32> {
    %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<i1>, tensor<i32>
    return %0 : tensor<i32>
  }
}
