module @jit_cumsum attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<6x40xf32>, %arg1: tensor<37xi32>) -> (tensor<6x40xf32> {jax.result_info = "result[0]"}, tensor<37xi32> {jax.result_info = "result[1]"}, tensor<4x8xf32> {jax.result_info = "result[2]"}) {
    %0 = call @cumsum(%arg0) : (tensor<6x40xf32>) -> tensor<6x40xf32>
    %1 = call @cumsum_1(%arg1) : (tensor<37xi32>) -> tensor<37xi32>
    %2 = stablehlo.slice %arg0 [0:4, 0:8] : (tensor<6x40xf32>) -> tensor<4x8xf32>
    %3 = call @cumprod(%2) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    return %0, %1, %3 : tensor<6x40xf32>, tensor<37xi32>, tensor<4x8xf32>
  }
  func.func private @cumsum(%arg0: tensor<6x40xf32>) -> tensor<6x40xf32> {
    %0 = call @cumsum_0(%arg0) : (tensor<6x40xf32>) -> tensor<6x40xf32>
    return %0 : tensor<6x40xf32>
  }
  func.func private @cumsum_0(%arg0: tensor<6x40xf32>) -> tensor<6x40xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<f32>
    %1 = "stablehlo.reduce_window"(%arg0, %0) <{base_dilations = array<i64: 1, 1>, padding = dense<[[0, 0], [39, 0]]> : tensor<2x2xi64>, window_dilations = array<i64: 1, 1>, window_dimensions = array<i64: 1, 40>, window_strides = array<i64: 1, 1>}> ({
    ^bb0(%arg1: tensor<f32>, %arg2: tensor<f32>):
      %2 = stablehlo.add %arg1, %arg2 : tensor<f32>
      stablehlo.return %2 : tensor<f32>
    }) : (tensor<6x40xf32>, tensor<f32>) -> tensor<6x40xf32>
    return %1 : tensor<6x40xf32>
  }
  func.func private @cumsum_1(%arg0: tensor<37xi32>) -> tensor<37xi32> {
    %0 = call @cumsum_2(%arg0) : (tensor<37xi32>) -> tensor<37xi32>
    return %0 : tensor<37xi32>
  }
  func.func private @cumsum_2(%arg0: tensor<37xi32>) -> tensor<37xi32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<i32>
    %1 = "stablehlo.reduce_window"(%arg0, %0) <{base_dilations = array<i64: 1>, padding = dense<[[36, 0]]> : tensor<1x2xi64>, window_dilations = array<i64: 1>, window_dimensions = array<i64: 37>, window_strides = array<i64: 1>}> ({
    ^bb0(%arg1: tensor<i32>, %arg2: tensor<i32>):
      %2 = stablehlo.add %arg1, %arg2 : tensor<i32>
      stablehlo.return %2 : tensor<i32>
    }) : (tensor<37xi32>, tensor<i32>) -> tensor<37xi32>
    return %1 : tensor<37xi32>
  }
  func.func private @cumprod(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %0 = call @cumprod_3(%arg0) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    return %0 : tensor<4x8xf32>
  }
  func.func private @cumprod_3(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %0 = "stablehlo.reduce_window"(%arg0, %cst) <{base_dilations = array<i64: 1, 1>, padding = dense<[[3, 0], [0, 0]]> : tensor<2x2xi64>, window_dilations = array<i64: 1, 1>, window_dimensions = array<i64: 4, 1>, window_strides = array<i64: 1, 1>}> ({
    ^bb0(%arg1: tensor<f32>, %arg2: tensor<f32>):
      %1 = stablehlo.multiply %arg1, %arg2 : tensor<f32>
      stablehlo.return %1 : tensor<f32>
    }) : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
    return %0 : tensor<4x8xf32>
  }
}
