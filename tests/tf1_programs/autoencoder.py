# ruff: noqa: F821, UP031, UP032, E741  (globals given by the test that runs the program; TF1-era style)
# An autoencoder in the style of the classic TF1 examples: encoder and
# decoder of sigmoid layers written with raw tf.Variable and tf.matmul,
# weights and biases in dicts drawn by tf.random_normal, the mean squared
# reconstruction error minimised by RMSProp, then the error on test images.
# Only the import line differs from a TensorFlow 1.x program; `mnist` and
# STEPS are given by the test that runs this file (the classic example ran
# 30000 steps of 256 with 256 and 128 hidden units).
import ferrograd.compat.v1 as tf

learning_rate = 0.01
num_steps = STEPS
batch_size = 128
display_step = 50

num_hidden_1 = 128
num_hidden_2 = 64
num_input = 784

tf.set_random_seed(4)
X = tf.placeholder("float", [None, num_input])

weights = {
    "encoder_h1": tf.Variable(tf.random_normal([num_input, num_hidden_1])),
    "encoder_h2": tf.Variable(tf.random_normal([num_hidden_1, num_hidden_2])),
    "decoder_h1": tf.Variable(tf.random_normal([num_hidden_2, num_hidden_1])),
    "decoder_h2": tf.Variable(tf.random_normal([num_hidden_1, num_input])),
}
biases = {
    "encoder_b1": tf.Variable(tf.random_normal([num_hidden_1])),
    "encoder_b2": tf.Variable(tf.random_normal([num_hidden_2])),
    "decoder_b1": tf.Variable(tf.random_normal([num_hidden_1])),
    "decoder_b2": tf.Variable(tf.random_normal([num_input])),
}


def encoder(x):
    layer_1 = tf.nn.sigmoid(tf.add(tf.matmul(x, weights["encoder_h1"]), biases["encoder_b1"]))
    layer_2 = tf.nn.sigmoid(tf.add(tf.matmul(layer_1, weights["encoder_h2"]), biases["encoder_b2"]))
    return layer_2


def decoder(x):
    layer_1 = tf.nn.sigmoid(tf.add(tf.matmul(x, weights["decoder_h1"]), biases["decoder_b1"]))
    layer_2 = tf.nn.sigmoid(tf.add(tf.matmul(layer_1, weights["decoder_h2"]), biases["decoder_b2"]))
    return layer_2


encoder_op = encoder(X)
decoder_op = decoder(encoder_op)

y_pred = decoder_op
y_true = X

loss = tf.reduce_mean(tf.pow(y_true - y_pred, 2))
optimizer = tf.train.RMSPropOptimizer(learning_rate).minimize(loss)

init = tf.global_variables_initializer()

with tf.Session() as sess:
    sess.run(init)
    for i in range(1, num_steps + 1):
        batch_x, _ = mnist.train.next_batch(batch_size)
        _, l = sess.run([optimizer, loss], feed_dict={X: batch_x})
        if i % display_step == 0 or i == 1:
            print("Step %i: Minibatch Loss: %f" % (i, l))
    test_loss = sess.run(loss, feed_dict={X: mnist.test.images})
    print("Test reconstruction loss: %f" % test_loss)
