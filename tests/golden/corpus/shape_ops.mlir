module @jit_shape_ops attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<8x15xf32>, %arg1: tensor<8x7xf32>) -> (tensor<5x4x6xf32> {jax.result_info = "result[0]"}, tensor<8x22xf32> {jax.result_info = "result[1]"}, tensor<11x18xf32> {jax.result_info = "result[2]"}, tensor<3x5xf32> {jax.result_info = "result[3]"}, tensor<8x7xf32> {jax.result_info = "result[4]"}) {
    %0 = stablehlo.reshape %arg0 : (tensor<8x15xf32>) -> tensor<4x6x5xf32>
    %1 = stablehlo.transpose %0, dims = [2, 0, 1] : (tensor<4x6x5xf32>) -> tensor<5x4x6xf32>
    %2 = stablehlo.concatenate %arg0, %arg1, dim = 1 : (tensor<8x15xf32>, tensor<8x7xf32>) -> tensor<8x22xf32>
    %cst = stablehlo.constant dense<1.500000e+00> : tensor<f32>
    %3 = call @_pad(%arg0, %cst) : (tensor<8x15xf32>, tensor<f32>) -> tensor<11x18xf32>
    %4 = stablehlo.slice %arg0 [1:7:2, 0:15:3] : (tensor<8x15xf32>) -> tensor<3x5xf32>
    %5 = call @_flip(%arg1) : (tensor<8x7xf32>) -> tensor<8x7xf32>
    return %1, %2, %3, %4, %5 : tensor<5x4x6xf32>, tensor<8x22xf32>, tensor<11x18xf32>, tensor<3x5xf32>, tensor<8x7xf32>
  }
  func.func private @_pad(%arg0: tensor<8x15xf32>, %arg1: tensor<f32>) -> tensor<11x18xf32> {
    %0 = stablehlo.convert %arg1 : tensor<f32>
    %1 = stablehlo.pad %arg0, %0, low = [1, 0], high = [2, 3], interior = [0, 0] : (tensor<8x15xf32>, tensor<f32>) -> tensor<11x18xf32>
    return %1 : tensor<11x18xf32>
  }
  func.func private @_flip(%arg0: tensor<8x7xf32>) -> tensor<8x7xf32> {
    %0 = stablehlo.reverse %arg0, dims = [0] : tensor<8x7xf32>
    return %0 : tensor<8x7xf32>
  }
}
