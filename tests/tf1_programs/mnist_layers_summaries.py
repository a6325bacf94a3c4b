# ruff: noqa: F821, UP031  (globals given by the test that runs the program; TF1-era formatting)
# A CNN written with tf.layers inside name scopes, with a dropout switch
# (`training` placeholder), a global step, and TensorBoard summaries
# (tf.summary.scalar / histogram, merge_all, FileWriter). Only the import
# line differs from a TensorFlow 1.x program; `mnist`, STEPS and LOGDIR are
# given by the test that runs this file.
import ferrograd.compat.v1 as tf

tf.set_random_seed(1)
with tf.name_scope("input"):
    x = tf.placeholder(tf.float32, [None, 784], name="x-input")
    y_ = tf.placeholder(tf.float32, [None, 10], name="y-input")
    training = tf.placeholder_with_default(False, shape=(), name="training")
    image = tf.reshape(x, [-1, 28, 28, 1])

with tf.name_scope("model"):
    net = tf.layers.conv2d(image, filters=16, kernel_size=5, padding="same", activation=tf.nn.relu)
    net = tf.layers.max_pooling2d(net, pool_size=2, strides=2)
    net = tf.layers.conv2d(net, filters=32, kernel_size=3, padding="same", activation=tf.nn.relu)
    net = tf.layers.max_pooling2d(net, pool_size=2, strides=2)
    net = tf.layers.flatten(net)
    net = tf.layers.dense(net, 128, activation=tf.nn.relu)
    net = tf.layers.dropout(net, rate=0.3, training=training)
    logits = tf.layers.dense(net, 10)
    tf.summary.histogram("logits", logits)

with tf.name_scope("loss"):
    loss = tf.losses.softmax_cross_entropy(onehot_labels=y_, logits=logits)
    tf.summary.scalar("loss", loss)

with tf.name_scope("train"):
    global_step = tf.train.get_or_create_global_step()
    train_op = tf.train.MomentumOptimizer(0.05, 0.9).minimize(loss, global_step=global_step)

with tf.name_scope("accuracy"):
    correct = tf.equal(tf.argmax(logits, 1), tf.argmax(y_, 1))
    accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))
    tf.summary.scalar("accuracy", accuracy)

merged = tf.summary.merge_all()
with tf.Session() as sess:
    writer = tf.summary.FileWriter(LOGDIR, sess.graph)
    sess.run(tf.global_variables_initializer())
    for i in range(STEPS):
        xs, ys = mnist.train.next_batch(64)
        summary, _ = sess.run([merged, train_op], feed_dict={x: xs, y_: ys, training: True})
        writer.add_summary(summary, i)
    writer.close()
    final_step = tf.train.global_step(sess, global_step)
    test_accuracy = sess.run(accuracy, feed_dict={x: mnist.test.images, y_: mnist.test.labels})
    print("test accuracy %g" % test_accuracy)
