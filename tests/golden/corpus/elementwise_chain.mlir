module @jit_elementwise_chain attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<130x3xf32>, %arg1: tensor<130x3xf32>) -> (tensor<130x3xf32> {jax.result_info = "result"}) {
    %0 = stablehlo.abs %arg0 : tensor<130x3xf32>
    %1 = stablehlo.negate %0 : tensor<130x3xf32>
    %2 = stablehlo.exponential %1 : tensor<130x3xf32>
    %3 = stablehlo.tanh %arg1 : tensor<130x3xf32>
    %4 = stablehlo.multiply %2, %3 : tensor<130x3xf32>
    %5 = stablehlo.multiply %arg0, %arg0 : tensor<130x3xf32>
    %6 = stablehlo.log_plus_one %5 : tensor<130x3xf32>
    %7 = stablehlo.add %4, %6 : tensor<130x3xf32>
    %8 = stablehlo.compare GT, %arg0, %arg1, FLOAT : (tensor<130x3xf32>, tensor<130x3xf32>) -> tensor<130x3xi1>
    %9 = stablehlo.negate %7 : tensor<130x3xf32>
    %10 = stablehlo.exponential %9 : tensor<130x3xf32>
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %11 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<130x3xf32>
    %12 = stablehlo.add %11, %10 : tensor<130x3xf32>
    %cst_0 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %13 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<130x3xf32>
    %14 = stablehlo.divide %13, %12 : tensor<130x3xf32>
    %15 = stablehlo.abs %7 : tensor<130x3xf32>
    %16 = stablehlo.sqrt %15 : tensor<130x3xf32>
    %cst_1 = stablehlo.constant dense<2.500000e-01> : tensor<f32>
    %17 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<130x3xf32>
    %18 = stablehlo.subtract %16, %17 : tensor<130x3xf32>
    %19 = call @_where(%8, %14, %18) : (tensor<130x3xi1>, tensor<130x3xf32>, tensor<130x3xf32>) -> tensor<130x3xf32>
    %cst_2 = stablehlo.constant dense<3.000000e+00> : tensor<f32>
    %20 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<130x3xf32>
    %21 = stablehlo.multiply %19, %20 : tensor<130x3xf32>
    %22 = stablehlo.multiply %arg0, %arg0 : tensor<130x3xf32>
    %cst_3 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %23 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f32>) -> tensor<130x3xf32>
    %24 = stablehlo.add %23, %22 : tensor<130x3xf32>
    %25 = stablehlo.divide %arg1, %24 : tensor<130x3xf32>
    %26 = stablehlo.subtract %21, %25 : tensor<130x3xf32>
    %cst_4 = stablehlo.constant dense<-2.000000e+00> : tensor<f32>
    %cst_5 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %27 = call @clip(%26, %cst_4, %cst_5) : (tensor<130x3xf32>, tensor<f32>, tensor<f32>) -> tensor<130x3xf32>
    return %27 : tensor<130x3xf32>
  }
  func.func private @_where(%arg0: tensor<130x3xi1>, %arg1: tensor<130x3xf32>, %arg2: tensor<130x3xf32>) -> tensor<130x3xf32> {
    %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<130x3xi1>, tensor<130x3xf32>
    return %0 : tensor<130x3xf32>
  }
  func.func private @clip(%arg0: tensor<130x3xf32>, %arg1: tensor<f32>, %arg2: tensor<f32>) -> tensor<130x3xf32> {
    %0 = stablehlo.convert %arg1 : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<f32>) -> tensor<130x3xf32>
    %2 = stablehlo.maximum %1, %arg0 : tensor<130x3xf32>
    %3 = stablehlo.convert %arg2 : tensor<f32>
    %4 = stablehlo.broadcast_in_dim %3, dims = [] : (tensor<f32>) -> tensor<130x3xf32>
    %5 = stablehlo.minimum %4, %2 : tensor<130x3xf32>
    return %5 : tensor<130x3xf32>
  }
}
