# ruff: noqa: F821, UP031  (globals given by the test that runs the program; TF1-era formatting)
# Softmax regression in the style of TF1's "MNIST for ML beginners".
# Only the import line differs from a TensorFlow 1.x program; `mnist` (with
# `train.next_batch`, `test.images`, `test.labels`, one-hot labels) is given
# by the test that runs this file.
import ferrograd.compat.v1 as tf

images = tf.placeholder(tf.float32, [None, 784])
weights = tf.Variable(tf.zeros([784, 10]))
bias = tf.Variable(tf.zeros([10]))
probs = tf.nn.softmax(tf.matmul(images, weights) + bias)

targets = tf.placeholder(tf.float32, [None, 10])
cross_entropy = tf.reduce_mean(-tf.reduce_sum(targets * tf.log(probs), reduction_indices=[1]))
train_step = tf.train.GradientDescentOptimizer(0.5).minimize(cross_entropy)

sess = tf.InteractiveSession()
tf.global_variables_initializer().run()
for _ in range(STEPS):  # the tutorial ran 1000
    batch_xs, batch_ys = mnist.train.next_batch(100)
    sess.run(train_step, feed_dict={images: batch_xs, targets: batch_ys})

correct = tf.equal(tf.argmax(probs, 1), tf.argmax(targets, 1))
accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))
print(sess.run(accuracy, feed_dict={images: mnist.test.images, targets: mnist.test.labels}))
final_weights, final_bias = sess.run([weights, bias])
sess.close()
