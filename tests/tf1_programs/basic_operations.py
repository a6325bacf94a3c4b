# ruff: noqa: UP031  (TF1-era formatting)
# Basic operations in the style of the classic TF1 examples: constants run
# in a session, placeholders fed at run time, several fetches at once, a
# counter variable updated with tf.assign, and a matrix product. Only the
# import line differs from a TensorFlow 1.x program.
import ferrograd.compat.v1 as tf

# Constants: the ops are built first, and compute when a session runs them.
a = tf.constant(2)
b = tf.constant(3)
with tf.Session() as sess:
    print("a=2, b=3")
    print("Addition with constants: %i" % sess.run(a + b))
    print("Multiplication with constants: %i" % sess.run(a * b))

# Placeholders: inputs given at each run through feed_dict.
a = tf.placeholder(tf.int16)
b = tf.placeholder(tf.int16)
add = tf.add(a, b)
mul = tf.multiply(a, b)
with tf.Session() as sess:
    print("Addition with variables: %i" % sess.run(add, feed_dict={a: 2, b: 3}))
    print("Multiplication with variables: %i" % sess.run(mul, feed_dict={a: 2, b: 3}))

# Several fetches in one run, and float placeholders fed lists.
input1 = tf.constant(3.0)
input2 = tf.constant(2.0)
input3 = tf.constant(5.0)
intermed = tf.add(input2, input3)
mul = tf.multiply(input1, intermed)
in1 = tf.placeholder(tf.float32)
in2 = tf.placeholder(tf.float32)
output = tf.multiply(in1, in2)
with tf.Session() as sess:
    print(sess.run([mul, intermed]))
    print(sess.run([output], feed_dict={in1: [7.0], in2: [2.0]}))

# A variable: a counter incremented by an assign op.
state = tf.Variable(0, name="counter")
one = tf.constant(1)
new_value = tf.add(state, one)
update = tf.assign(state, new_value)
init_op = tf.global_variables_initializer()
with tf.Session() as sess:
    sess.run(init_op)
    print(sess.run(state))
    for _ in range(3):
        sess.run(update)
        print(sess.run(state))

# A matrix product: a 1x2 matrix times a 2x1 matrix.
matrix1 = tf.constant([[3.0, 3.0]])
matrix2 = tf.constant([[2.0], [2.0]])
product = tf.matmul(matrix1, matrix2)
with tf.Session() as sess:
    result = sess.run(product)
    print(result)
    print(result.dtype, result.shape)
