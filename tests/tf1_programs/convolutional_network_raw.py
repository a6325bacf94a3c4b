# ruff: noqa: F821, UP031, UP032  (globals given by the test that runs the program; TF1-era style)
# A CNN in raw TF1 ops in the style of the classic examples: helpers around
# tf.nn.conv2d (+ tf.nn.bias_add, ReLU) and tf.nn.max_pool, weights and
# biases in dicts drawn by tf.random_normal, a fully connected layer sized
# from get_shape(), dropout through a keep_prob placeholder, Adam, and the
# minibatch loss and accuracy printed every few steps. Only the import line
# differs from a TensorFlow 1.x program; `mnist` and STEPS are given by the
# test that runs this file (the classic example ran 500 steps of 128 with
# 32/64 filters and 1024 units; the sizes here are smaller to run fast).
import ferrograd.compat.v1 as tf

learning_rate = 0.001
num_steps = STEPS
batch_size = 64
display_step = 10

num_input = 784
num_classes = 10
dropout = 0.75

tf.set_random_seed(11)
X = tf.placeholder(tf.float32, [None, num_input])
Y = tf.placeholder(tf.float32, [None, num_classes])
keep_prob = tf.placeholder(tf.float32)


def conv2d(x, W, b, strides=1):
    x = tf.nn.conv2d(x, W, strides=[1, strides, strides, 1], padding="SAME")
    x = tf.nn.bias_add(x, b)
    return tf.nn.relu(x)


def maxpool2d(x, k=2):
    return tf.nn.max_pool(x, ksize=[1, k, k, 1], strides=[1, k, k, 1], padding="SAME")


def conv_net(x, weights, biases, dropout):
    x = tf.reshape(x, shape=[-1, 28, 28, 1])
    conv1 = conv2d(x, weights["wc1"], biases["bc1"])
    conv1 = maxpool2d(conv1, k=2)
    conv2 = conv2d(conv1, weights["wc2"], biases["bc2"])
    conv2 = maxpool2d(conv2, k=2)
    fc1 = tf.reshape(conv2, [-1, weights["wd1"].get_shape().as_list()[0]])
    fc1 = tf.add(tf.matmul(fc1, weights["wd1"]), biases["bd1"])
    fc1 = tf.nn.relu(fc1)
    fc1 = tf.nn.dropout(fc1, dropout)
    out = tf.add(tf.matmul(fc1, weights["out"]), biases["out"])
    return out


weights = {
    "wc1": tf.Variable(tf.random_normal([5, 5, 1, 8])),
    "wc2": tf.Variable(tf.random_normal([5, 5, 8, 16])),
    "wd1": tf.Variable(tf.random_normal([7 * 7 * 16, 128])),
    "out": tf.Variable(tf.random_normal([128, num_classes])),
}
biases = {
    "bc1": tf.Variable(tf.random_normal([8])),
    "bc2": tf.Variable(tf.random_normal([16])),
    "bd1": tf.Variable(tf.random_normal([128])),
    "out": tf.Variable(tf.random_normal([num_classes])),
}

logits = conv_net(X, weights, biases, keep_prob)
prediction = tf.nn.softmax(logits)

loss_op = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(logits=logits, labels=Y))
optimizer = tf.train.AdamOptimizer(learning_rate=learning_rate)
train_op = optimizer.minimize(loss_op)

correct_pred = tf.equal(tf.argmax(prediction, 1), tf.argmax(Y, 1))
accuracy = tf.reduce_mean(tf.cast(correct_pred, tf.float32))

init = tf.global_variables_initializer()

with tf.Session() as sess:
    sess.run(init)
    for step in range(1, num_steps + 1):
        batch_x, batch_y = mnist.train.next_batch(batch_size)
        sess.run(train_op, feed_dict={X: batch_x, Y: batch_y, keep_prob: dropout})
        if step % display_step == 0 or step == 1:
            loss, acc = sess.run([loss_op, accuracy], feed_dict={X: batch_x, Y: batch_y, keep_prob: 1.0})
            print(
                "Step "
                + str(step)
                + ", Minibatch Loss= "
                + "{:.4f}".format(loss)
                + ", Training Accuracy= {:.3f}".format(acc)
            )
    print("Optimization Finished!")
    test_accuracy = sess.run(accuracy, feed_dict={X: mnist.test.images, Y: mnist.test.labels, keep_prob: 1.0})
    print("Testing Accuracy:", test_accuracy)
